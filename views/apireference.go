package views

// APIReferenceURL is where the gateway serves its admin API reference.
const APIReferenceURL = "/api/v1/reference"

// APIReference is the admin API's reference page, built from the OpenAPI
// document the API serves, so it lists exactly what the server does.
type APIReference struct {
	Title       string
	Version     string
	Description string
	DocumentURL string // the OpenAPI document itself
	Operations  []APIOperation
	Problem     []APIField // the shape of every error
}

// APIOperation is one operation: what it does, who may call it, what it
// takes and what it answers.
type APIOperation struct {
	ID          string
	Method      string
	Path        string
	Summary     string
	Access      string // who may call it, in words
	Idempotency bool   // honours Idempotency-Key
	Params      []APIParam
	Request     []APIField // nil: no body
	Response    APIResponse
	Errors      []string // the error statuses it documents, e.g. "404 Not Found"
}

// APIParam is a path, query or header parameter.
type APIParam struct {
	Name     string
	In       string
	Type     string
	Required bool
	Doc      string
}

// APIResponse is an operation's success answer.
type APIResponse struct {
	Status string // "200 OK"
	Fields []APIField
}

// APIField is one field of a JSON body; nested fields are named by their
// path (limits.rate_limit, members[].email).
type APIField struct {
	Name     string
	Type     string
	Required bool
	Doc      string
}
