package api

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/views"
)

// referenceCSP lets the reference page load the console's own stylesheet
// and scripts and nothing else: it references no other origin.
const referenceCSP = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// reference serves the API reference page, built once from doc: the same
// document /api/v1/openapi.json serves, so the page lists what the server does.
func reference(doc *huma.OpenAPI) http.Handler {
	page := templ.Handler(views.APIReferencePage(referenceOf(doc)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", referenceCSP)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		page.ServeHTTP(w, r)
	})
}

// accessWords says who may call an operation of each access.
var accessWords = map[Access]string{
	AccessRead:       "any token of the team (read or owner)",
	AccessOwner:      "an owner token of the team",
	AccessDeployment: "an owner token of the deployment",
	AccessAnyToken:   "any token, of a team or of the deployment",
}

// referenceOf is doc as the reference page shows it, operations in path order.
func referenceOf(doc *huma.OpenAPI) views.APIReference {
	ref := views.APIReference{Title: doc.Info.Title, Version: doc.Info.Version, Description: doc.Info.Description,
		DocumentURL: Prefix + "/openapi.json"}
	resolve := func(s *huma.Schema) *huma.Schema {
		if s != nil && s.Ref != "" {
			return doc.Components.Schemas.SchemaFromRef(s.Ref)
		}
		return s
	}
	for _, path := range slices.Sorted(func(yield func(string) bool) {
		for p := range doc.Paths {
			if !yield(p) {
				return
			}
		}
	}) {
		item := doc.Paths[path]
		for _, op := range []*huma.Operation{item.Get, item.Post, item.Put, item.Patch, item.Delete} {
			if op == nil {
				continue
			}
			ref.Operations = append(ref.Operations, operationOf(op, resolve))
		}
	}
	ref.Problem = schemaFields(resolve(doc.Components.Schemas.Map()["Problem"]), "", resolve, 0)
	return ref
}

func operationOf(op *huma.Operation, resolve func(*huma.Schema) *huma.Schema) views.APIOperation {
	o := views.APIOperation{ID: op.OperationID, Method: op.Method, Path: op.Path, Summary: op.Summary,
		Access: "called by " + accessWords[AccessOf(op)], Idempotency: op.Metadata["idempotent"] == true}
	for _, p := range op.Parameters {
		o.Params = append(o.Params, views.APIParam{Name: p.Name, In: p.In, Type: typeOf(p.Schema, resolve), Required: p.Required,
			Doc: cmp.Or(p.Description, docOf(p.Schema))})
	}
	if op.RequestBody != nil {
		if mt := op.RequestBody.Content["application/json"]; mt != nil {
			o.Request = schemaFields(resolve(mt.Schema), "", resolve, 0)
			if o.Request == nil {
				o.Request = []views.APIField{}
			}
		}
	}
	for _, code := range slices.Sorted(func(yield func(string) bool) {
		for c := range op.Responses {
			if !yield(c) {
				return
			}
		}
	}) {
		status, _ := strconv.Atoi(code)
		words := code + " " + http.StatusText(status)
		if status >= 400 {
			o.Errors = append(o.Errors, words)
			continue
		}
		o.Response.Status = words
		if mt := op.Responses[code].Content["application/json"]; mt != nil {
			o.Response.Fields = schemaFields(resolve(mt.Schema), "", resolve, 0)
		}
	}
	return o
}

// schemaFields lists an object's fields, and those of the objects inside it, by
// their path; depth stops a schema that refers to itself.
func schemaFields(s *huma.Schema, prefix string, resolve func(*huma.Schema) *huma.Schema, depth int) []views.APIField {
	if s == nil || depth > 4 {
		return nil
	}
	var out []views.APIField
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range s.Properties {
			if !yield(n) {
				return
			}
		}
	}) {
		field := resolve(s.Properties[name])
		out = append(out, views.APIField{Name: prefix + name, Type: typeOf(s.Properties[name], resolve),
			Required: slices.Contains(s.Required, name), Doc: docOf(s.Properties[name])})
		switch {
		case field.Type == huma.TypeObject:
			out = append(out, schemaFields(field, prefix+name+".", resolve, depth+1)...)
		case field.Type == huma.TypeArray && field.Items != nil:
			out = append(out, schemaFields(resolve(field.Items), prefix+name+"[].", resolve, depth+1)...)
		}
	}
	return out
}

// typeOf is a schema's type in words: "integer (int64)", "string, or null",
// "array of object".
func typeOf(s *huma.Schema, resolve func(*huma.Schema) *huma.Schema) string {
	r := resolve(s)
	if r == nil {
		return "any"
	}
	t := cmp.Or(r.Type, "any")
	if r.Format != "" {
		t += " (" + r.Format + ")"
	}
	if r.Type == huma.TypeArray && r.Items != nil {
		t = "array of " + typeOf(r.Items, resolve)
	}
	if r.Nullable || s.Nullable {
		t += ", or null"
	}
	return t
}

// docOf is a field's description with its constraints.
func docOf(s *huma.Schema) string {
	if s == nil {
		return ""
	}
	parts := []string{s.Description}
	if len(s.Enum) > 0 {
		values := make([]string, len(s.Enum))
		for i, v := range s.Enum {
			values[i] = fmt.Sprint(v)
		}
		parts = append(parts, "One of: "+strings.Join(values, ", ")+".")
	}
	if s.Minimum != nil {
		parts = append(parts, fmt.Sprintf("Minimum %v.", *s.Minimum))
	}
	if s.Maximum != nil {
		parts = append(parts, fmt.Sprintf("Maximum %v.", *s.Maximum))
	}
	if s.MaxLength != nil {
		parts = append(parts, fmt.Sprintf("At most %d characters.", *s.MaxLength))
	}
	if s.Pattern != "" {
		parts = append(parts, "Pattern "+s.Pattern+".")
	}
	if s.Default != nil {
		parts = append(parts, fmt.Sprintf("Default %v.", s.Default))
	}
	if len(s.Examples) > 0 {
		parts = append(parts, fmt.Sprintf("Example: %v.", s.Examples[0]))
	}
	return strings.TrimSpace(strings.Join(parts, " "))
}
