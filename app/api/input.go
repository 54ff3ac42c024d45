package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
)

// maxBody bounds a request body read before huma reads it: huma's own limit.
const maxBody = 1 << 20

// checkInput refuses, before huma decodes them, parameters that are not UTF-8
// (Postgres would refuse them with an error of its own, a 500) and a JSON body
// that decoding would silently change. encoding/json turns bytes that are not
// UTF-8 into U+FFFD, so a name would be stored as something nobody typed; and
// every number this API takes is a whole int64 (micro-dollars, milliseconds,
// counts), so a fraction, an exponent (1e3) or a number past int64 is refused
// here, naming its field, rather than left to a decoder error that names none.
// What stays in range is the store's to check, against the same bounds for
// every writer.
func checkInput() func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		for _, param := range ctx.Operation().Parameters {
			var v string
			switch param.In {
			case "path":
				v = ctx.Param(param.Name)
			case "query":
				v = ctx.Query(param.Name)
			case "header":
				v = ctx.Header(param.Name)
			}
			if !utf8.ValidString(v) {
				msg := param.Name + " is not valid UTF-8"
				p := problem(http.StatusUnprocessableEntity, ProblemValidation, msg)
				p.Errors = []ProblemDetail{{Location: param.In + "." + param.Name, Message: msg}}
				writeHumaProblem(ctx, p)
				return
			}
		}
		if ctx.Operation().RequestBody == nil {
			next(ctx)
			return
		}
		body, err := io.ReadAll(io.LimitReader(ctx.BodyReader(), maxBody+1))
		if err != nil || len(body) > maxBody {
			writeHumaProblem(ctx, problem(http.StatusRequestEntityTooLarge, ProblemValidation, "request body too large or unreadable"))
			return
		}
		if d := bodyFault(body); d != nil {
			p := problem(http.StatusUnprocessableEntity, ProblemValidation, d.Message)
			p.Errors = []ProblemDetail{*d}
			writeHumaProblem(ctx, p)
			return
		}
		next(huma.WithValue(&bodyContext{humaContext: ctx, body: bytes.NewReader(body)}, rawBodyKey{}, body))
	}
}

type rawBodyKey struct{}

// rawBody is the request's body as it was sent, for a handler that must tell
// a field left out from a field sent as null (a PATCH), which decode alike.
func rawBody(ctx context.Context) []byte {
	body, _ := ctx.Value(rawBodyKey{}).([]byte)
	return body
}

// bodyContext serves the request from the body checkBody read.
type bodyContext struct {
	humaContext
	body io.Reader
}

func (c *bodyContext) BodyReader() io.Reader { return c.body }

// bodyFault is the first value of body that decoding would change, located as
// huma locates fields (body.limits.rate_period_ms, body.rows[2]), or nil. The
// rest of a body that is not JSON is left to huma, which answers 400.
func bodyFault(body []byte) *ProblemDetail {
	bad := invalidUTF8At(body)
	type frame struct {
		object, wantKey bool
		key             string
		index           int
	}
	var stack []*frame
	// fault names the value read last by where it is, as huma locates fields.
	fault := func(format string, args ...any) *ProblemDetail {
		var b strings.Builder
		b.WriteString("body")
		for _, f := range stack {
			if f.object {
				b.WriteString("." + f.key)
			} else {
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			}
		}
		loc, name := b.String(), strings.TrimPrefix(b.String(), "body.")
		if loc == "body" {
			name = "the request body"
		}
		return &ProblemDetail{Location: loc, Message: name + " " + fmt.Sprintf(format, args...)}
	}
	// valueDone moves the innermost container past the value just read.
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		if top := stack[len(stack)-1]; top.object {
			top.wantKey = true
		} else {
			top.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			break
		}
		end := dec.InputOffset()
		isKey := false
		if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].wantKey {
			if key, ok := tok.(string); ok {
				isKey = true
				stack[len(stack)-1].key, stack[len(stack)-1].wantKey = key, false
			}
		}
		if int64(bad) >= start && int64(bad) < end || replacedSurrogate(tok, body[start:end]) {
			return fault("is not valid UTF-8")
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{object: true, wantKey: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		case json.Number:
			if _, err := strconv.ParseInt(t.String(), 10, 64); err != nil {
				if strings.ContainsAny(t.String(), ".eE") {
					return fault("must be a whole number, written without a fraction or exponent, not %s", t)
				}
				return fault("is out of range: %s is past ±9223372036854775807, beyond every number this API takes", t)
			}
		}
		if !isKey {
			valueDone()
		}
	}
	if bad >= 0 {
		return &ProblemDetail{Location: "body", Message: "the request body is not valid UTF-8"}
	}
	return nil
}

// invalidUTF8At is the offset of the first byte of b that is not UTF-8, or -1.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// replacedSurrogate reports a string the decoder changed although its bytes
// are UTF-8: an escaped lone surrogate (\ud800) decodes to U+FFFD, so the
// string holds more of them than raw spelled, as bytes or as \ufffd.
func replacedSurrogate(tok json.Token, raw []byte) bool {
	s, ok := tok.(string)
	if !ok {
		return false
	}
	spelled := bytes.Count(raw, []byte(string(utf8.RuneError))) + bytes.Count(bytes.ToLower(raw), []byte(`\ufffd`))
	return strings.Count(s, string(utf8.RuneError)) > spelled
}
