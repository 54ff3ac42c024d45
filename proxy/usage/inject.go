package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// InjectIncludeUsage makes a streamed OpenAI chat (or completions) request ask for the
// usage chunk: it returns body with stream_options.include_usage set to true and changed
// true, or body itself and false when it already asks or does not stream (OpenAI refuses
// stream_options without "stream": true). The change is a splice: every other byte of
// the body stays as sent, so no number loses precision and no key moves. A body that is
// not a JSON object, a stream_options that is not an object or null, and a key it reads
// given twice (which one the upstream honours is not ours to guess) are errors.
func InjectIncludeUsage(body []byte) (out []byte, changed bool, err error) {
	top, err := parseObject(body, 0)
	if err != nil {
		return nil, false, fmt.Errorf("usage: include_usage: %w", err)
	}
	stream, err := top.only("stream")
	if err != nil {
		return nil, false, err
	}
	if stream == nil || string(stream.value(body)) != "true" {
		return body, false, nil
	}
	opts, err := top.only("stream_options")
	if err != nil {
		return nil, false, err
	}
	switch {
	case opts == nil:
		return top.insert(body, `"stream_options":{"include_usage":true}`), true, nil
	case string(opts.value(body)) == "null":
		return splice(body, opts.start, opts.end, `{"include_usage":true}`), true, nil
	case body[opts.start] != '{':
		return nil, false, errors.New("usage: include_usage: stream_options is not an object")
	}
	inner, err := parseObject(body[:opts.end], opts.start)
	if err != nil {
		return nil, false, fmt.Errorf("usage: include_usage: stream_options: %w", err)
	}
	include, err := inner.only("include_usage")
	switch {
	case err != nil:
		return nil, false, err
	case include == nil:
		return inner.insert(body, `"include_usage":true`), true, nil
	case string(include.value(body)) == "true":
		return body, false, nil
	}
	return splice(body, include.start, include.end, "true"), true, nil
}

// object is where a JSON object's members are in a body: byte offsets into it.
type object struct {
	open    int // just past the opening brace
	members []member
}

type member struct {
	key        string // unescaped, as the upstream reads it
	start, end int    // the value
}

func (m *member) value(body []byte) []byte { return body[m.start:m.end] }

// parseObject finds the members of the object that b[from:] holds, offsets counted
// from the start of b.
func parseObject(b []byte, from int) (object, error) {
	if !json.Valid(b[from:]) {
		return object{}, errors.New("not valid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(b[from:]))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return object{}, errors.New("not a JSON object")
	}
	o := object{open: from + int(dec.InputOffset())}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return object{}, err
		}
		key, _ := tok.(string)
		keyEnd := from + int(dec.InputOffset())
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return object{}, err
		}
		// The value is v's exact bytes after the colon and any whitespace.
		start := skipSpace(b, skipSpace(b, keyEnd)+1)
		o.members = append(o.members, member{key: key, start: start, end: start + len(v)})
	}
	return o, nil
}

// only returns the member named key, nil if there is none, and an error if there are two.
func (o *object) only(key string) (*member, error) {
	var found *member
	for i := range o.members {
		if o.members[i].key == key {
			if found != nil {
				return nil, fmt.Errorf("usage: include_usage: %q given twice", key)
			}
			found = &o.members[i]
		}
	}
	return found, nil
}

// insert adds a member after the last one, or first in an empty object.
func (o *object) insert(body []byte, m string) []byte {
	if len(o.members) == 0 {
		return splice(body, o.open, o.open, m)
	}
	end := o.members[len(o.members)-1].end
	return splice(body, end, end, ","+m)
}

func splice(body []byte, start, end int, s string) []byte {
	out := make([]byte, 0, len(body)-(end-start)+len(s))
	out = append(out, body[:start]...)
	out = append(out, s...)
	return append(out, body[end:]...)
}

// LowerOutputCap sets each of fields that the body's top-level object has to at
// most limit, leaving every other byte as it was; with none of them present it adds
// the first. The gateway lowers an output cap to fit what a budget has left.
func LowerOutputCap(body []byte, fields []string, limit int64) ([]byte, error) {
	top, err := parseObject(body, 0)
	if err != nil {
		return nil, fmt.Errorf("usage: output cap: %w", err)
	}
	value := strconv.FormatInt(limit, 10)
	var found []*member
	for _, f := range fields {
		m, err := top.only(f)
		if err != nil {
			return nil, err
		}
		if m != nil {
			found = append(found, m)
		}
	}
	if len(found) == 0 {
		return top.insert(body, strconv.Quote(fields[0])+":"+value), nil
	}
	// Later values first, so that the earlier offsets still hold.
	slices.SortFunc(found, func(a, b *member) int { return b.start - a.start })
	for _, m := range found {
		if n, err := strconv.ParseInt(string(m.value(body)), 10, 64); err == nil && n <= limit {
			continue
		}
		body = splice(body, m.start, m.end, value)
	}
	return body, nil
}
