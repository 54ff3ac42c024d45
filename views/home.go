package views

import (
	"fmt"
	"strings"
)

// Home is a member's own page.
type Home struct {
	Nav       Nav
	Checklist *Checklist // an owner's team's first steps; nil once done, and for members
	Disabled  bool       // cut off by an owner
	Keys      Keys
	Usage     *Usage // live over the usage stream
	Snippets  []Snippet
	Budget    BudgetAsk
}

// Snippet is ready-to-paste code that calls the gateway.
type Snippet struct {
	Title string
	Code  string
}

// SnippetRoute is a team route a snippet can call.
type SnippetRoute struct {
	Prefix  string
	Dialect string // anthropic, openai or generic
	// MissingCredential names the credential variable the route needs and the
	// gateway lacks: every call on it answers 503. "" when the route works.
	MissingCredential string
}

// Snippets returns code for the official SDKs and curl, pointed at each of the
// team's routes on baseURL; the key comes from $TOLLGATE_KEY, never the page.
func Snippets(baseURL string, routes []SnippetRoute) []Snippet {
	baseURL = strings.TrimRight(baseURL, "/")
	var out []Snippet
	for _, r := range routes {
		url := baseURL + r.Prefix
		where := " (" + r.Prefix + ")"
		if r.MissingCredential != "" {
			where = " (" + r.Prefix + ": answers 503 until the gateway has $" + r.MissingCredential + ")"
		}
		switch r.Dialect {
		case "anthropic":
			out = append(out,
				Snippet{"Anthropic SDK, Python" + where, fmt.Sprintf(anthropicPython, url)},
				Snippet{"Anthropic SDK, TypeScript" + where, fmt.Sprintf(anthropicTS, url)},
				Snippet{"curl" + where, fmt.Sprintf(anthropicCurl, url)})
		case "openai":
			out = append(out,
				Snippet{"OpenAI SDK, Python" + where, fmt.Sprintf(openaiPython, url+"/v1")},
				Snippet{"OpenAI SDK, TypeScript" + where, fmt.Sprintf(openaiTS, url+"/v1")},
				Snippet{"curl" + where, fmt.Sprintf(openaiCurl, url)})
		default:
			out = append(out, Snippet{"curl" + where, fmt.Sprintf(genericCurl, url)})
		}
	}
	return out
}

const anthropicPython = `import os
import anthropic

client = anthropic.Anthropic(
    base_url="%s",
    api_key=os.environ["TOLLGATE_KEY"],
)
message = client.messages.create(
    model="claude-sonnet-4-6",
    max_tokens=256,
    messages=[{"role": "user", "content": "Hello"}],
)
print(message.content[0].text)`

const anthropicTS = `import Anthropic from "@anthropic-ai/sdk";

const client = new Anthropic({
  baseURL: "%s",
  apiKey: process.env.TOLLGATE_KEY,
});
const message = await client.messages.create({
  model: "claude-sonnet-4-6",
  max_tokens: 256,
  messages: [{ role: "user", content: "Hello" }],
});
console.log(message.content);`

const anthropicCurl = `curl %s/v1/messages \
  -H "x-api-key: $TOLLGATE_KEY" \
  -H "anthropic-version: 2023-06-01" \
  -H "content-type: application/json" \
  -d '{"model":"claude-sonnet-4-6","max_tokens":256,"messages":[{"role":"user","content":"Hello"}]}'`

const openaiPython = `import os
from openai import OpenAI

client = OpenAI(
    base_url="%s",
    api_key=os.environ["TOLLGATE_KEY"],
)
completion = client.chat.completions.create(
    model="gpt-5.4-mini",
    messages=[{"role": "user", "content": "Hello"}],
)
print(completion.choices[0].message.content)`

const openaiTS = `import OpenAI from "openai";

const client = new OpenAI({
  baseURL: "%s",
  apiKey: process.env.TOLLGATE_KEY,
});
const completion = await client.chat.completions.create({
  model: "gpt-5.4-mini",
  messages: [{ role: "user", content: "Hello" }],
});
console.log(completion.choices[0].message.content);`

const openaiCurl = `curl %s/v1/chat/completions \
  -H "Authorization: Bearer $TOLLGATE_KEY" \
  -H "content-type: application/json" \
  -d '{"model":"gpt-5.4-mini","messages":[{"role":"user","content":"Hello"}]}'`

const genericCurl = `curl %s/ \
  -H "Authorization: Bearer $TOLLGATE_KEY"`

// Checklist is a new team's first steps, shown to owners until all are done.
// The first is the limits new members get, with a form to change them.
type Checklist struct {
	Defaults DefaultsForm
	Steps    []ChecklistStep
}

// DefaultsURL is where the checklist's limits form posts.
const DefaultsURL = "/console/checklist/defaults"

// DefaultsForm is the default tier's limits and the team budget, as the
// checklist shows and edits them. A blank value is no limit of that kind.
type DefaultsForm struct {
	Tier        string // the default tier's name; "" when new members land in none
	Rate        string // requests per Period
	Period      string // "1m"
	TPM         string
	Concurrency string
	Budget      string // dollars a month (or the tier's budget period) per member
	TeamBudget  string // dollars a month (or the team's budget period) for the team
	Done        bool   // new members land in a tier with a budget, and the team has one
	Error       string
	Saved       bool
}

// ChecklistStep is one step, with where to do it.
type ChecklistStep struct {
	Label string
	Hint  string
	URL   string
	Done  bool
}

func boolAttr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
