package views

// Prices is the price list, with the form to add or change a model's price.
type Prices struct {
	Nav      Nav
	Rows     []PriceRow
	Form     PriceForm
	ReadOnly bool // several teams share this gateway's prices: only the operator sets them
	Saved    string
	// The search narrowing Rows: a part of the model's name, a provider ("" for all).
	Query     string
	Provider  string
	Providers []string
	Total     int // models before the search
}

// Filtered reports whether the search leaves models out.
func (p Prices) Filtered() bool { return p.Query != "" || p.Provider != "" }

// PriceRow is one model's price, in dollars per million tokens.
type PriceRow struct {
	Model        string
	Provider     string
	Input        string
	Output       string
	CacheWrite   string
	CacheWrite1h string
	CacheRead    string
	MaxOutput    string
	Tier         string // "above 200000 input tokens: ..."; "" without a tier
	EditURL      string
}

// PriceForm sets one model's price; fields are as typed.
type PriceForm struct {
	Action       string
	Edit         bool // changing an existing model: its name is fixed
	Model        string
	Provider     string
	Input        string
	Output       string
	CacheWrite   string
	CacheWrite1h string
	CacheRead    string
	MaxOutput    string
	TakenOn      string // when the current list price was taken, on the edit page
	Error        string
}

// PriceEdit is the page changing one model's price.
type PriceEdit struct {
	Nav  Nav
	Form PriceForm
}
