package estimate

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of objects and arrays a body may have; the
// top-level object is depth 1.
const MaxDepth = 64

// A map replaces the linear duplicate-key search once an object has this many keys,
// so a body with one huge object cannot make the scan quadratic.
const linearKeys = 16

// scanner validates JSON strictly: RFC 8259 syntax only (no NaN, Infinity,
// comments or trailing commas), valid UTF-8 with no unpaired surrogate escapes, no
// object with the same key twice (compared after unescaping), at most MaxDepth
// levels. Whatever it accepts, every conforming parser reads the same way, so the
// estimate and the upstream can never see different values.
type scanner struct {
	data []byte
	i    int
	keys [][]byte // decoded keys of the objects being scanned, innermost last
}

// member is told of each member of the object scan starts on: its decoded key and
// its value, as raw JSON.
type member func(key, value []byte) error

// scan checks that body is one strict JSON object and calls top for its members.
func scan(body []byte, top member) error {
	if !utf8.Valid(body) {
		return invalidBody("request body is not valid UTF-8")
	}
	s := scanner{data: body}
	s.space()
	if s.i == len(s.data) {
		return invalidBody("request body is empty; send a JSON object")
	}
	if s.data[s.i] != '{' {
		return invalidBody("request body must be a JSON object")
	}
	if err := s.object(1, top); err != nil {
		return err
	}
	s.space()
	if s.i != len(s.data) {
		return s.fail("data after the JSON object")
	}
	return nil
}

func (s *scanner) fail(what string) error {
	return invalidBody("request body is not valid JSON: %s at byte %d", what, s.i)
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) error {
	if s.i == len(s.data) {
		return s.fail("unexpected end")
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return s.object(depth+1, nil)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		_, _, err := s.str()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return s.number()
	case c == 'N' || c == 'I':
		return s.fail("NaN and Infinity are not JSON")
	default:
		return s.fail("unexpected " + strconv.QuoteRune(rune(c)))
	}
}

func (s *scanner) object(depth int, each member) error {
	if depth > MaxDepth {
		return s.fail("nesting deeper than " + strconv.Itoa(MaxDepth) + " levels")
	}
	s.i++ // '{'
	base := len(s.keys)
	defer func() { s.keys = s.keys[:base] }()
	var seen map[string]struct{} // once the object outgrows linearKeys
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.space()
		if s.i == len(s.data) || s.data[s.i] != '"' {
			return s.fail("expected a string key")
		}
		keyAt := s.i
		raw, escaped, err := s.str()
		if err != nil {
			return err
		}
		key := raw
		if escaped {
			key = unescape(raw)
		}
		if seen != nil {
			if _, dup := seen[string(key)]; dup {
				return s.duplicate(key, keyAt)
			}
			seen[string(key)] = struct{}{}
		} else {
			for _, k := range s.keys[base:] {
				if bytes.Equal(k, key) {
					return s.duplicate(key, keyAt)
				}
			}
			s.keys = append(s.keys, key)
			if len(s.keys)-base > linearKeys {
				seen = make(map[string]struct{}, 2*linearKeys)
				for _, k := range s.keys[base:] {
					seen[string(k)] = struct{}{}
				}
			}
		}
		s.space()
		if s.i == len(s.data) || s.data[s.i] != ':' {
			return s.fail("expected ':' after an object key")
		}
		s.i++
		s.space()
		start := s.i
		if err := s.value(depth); err != nil {
			return err
		}
		if each != nil {
			if err := each(key, s.data[start:s.i]); err != nil {
				return err
			}
		}
		s.space()
		if s.i == len(s.data) {
			return s.fail("unexpected end in an object")
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or '}' in an object")
		}
	}
}

func (s *scanner) duplicate(key []byte, at int) error {
	return invalidBody("request body has the key %s twice in one object (at byte %d); an upstream could read either value", shown(strconv.AppendQuote(nil, string(key))), at)
}

func (s *scanner) array(depth int) error {
	if depth > MaxDepth {
		return s.fail("nesting deeper than " + strconv.Itoa(MaxDepth) + " levels")
	}
	s.i++ // '['
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		s.space()
		if err := s.value(depth); err != nil {
			return err
		}
		s.space()
		if s.i == len(s.data) {
			return s.fail("unexpected end in an array")
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or ']' in an array")
		}
	}
}

// plain marks the bytes that stand for themselves inside a string.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str scans the string at s.i and returns its raw contents, without the quotes.
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	s.i++ // '"'
	start := s.i
	for {
		for s.i < len(s.data) && plain[s.data[s.i]] {
			s.i++
		}
		if s.i == len(s.data) {
			return nil, false, s.fail("unterminated string")
		}
		switch c := s.data[s.i]; c {
		case '"':
			raw = s.data[start:s.i]
			s.i++
			return raw, escaped, nil
		case '\\':
			escaped = true
			if err := s.escape(); err != nil {
				return nil, false, err
			}
		default:
			return nil, false, s.fail("unescaped control character in a string")
		}
	}
}

func (s *scanner) escape() error {
	if s.i+1 >= len(s.data) {
		return s.fail("unterminated string")
	}
	switch s.data[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return nil
	case 'u':
	default:
		return s.fail("invalid escape")
	}
	r, ok := hex4(s.data[s.i+2:])
	if !ok {
		return s.fail(`invalid \u escape`)
	}
	s.i += 6
	switch {
	case 0xDC00 <= r && r < 0xE000:
		return s.fail("unpaired surrogate escape")
	case 0xD800 <= r && r < 0xDC00:
		if s.i+1 < len(s.data) && s.data[s.i] == '\\' && s.data[s.i+1] == 'u' {
			if lo, ok := hex4(s.data[s.i+2:]); ok && 0xDC00 <= lo && lo < 0xE000 {
				s.i += 6
				return nil
			}
		}
		return s.fail("unpaired surrogate escape")
	}
	return nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func (s *scanner) number() error {
	if s.data[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		n := 0
		for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	switch {
	case s.i == len(s.data):
		return s.fail("unexpected end in a number")
	case s.data[s.i] == '0':
		s.i++
	case '1' <= s.data[s.i] && s.data[s.i] <= '9':
		digits()
	case s.data[s.i] == 'I':
		return s.fail("NaN and Infinity are not JSON")
	default:
		return s.fail("invalid number")
	}
	if s.i < len(s.data) && s.data[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return s.fail("invalid number")
		}
	}
	if s.i < len(s.data) && (s.data[s.i] == 'e' || s.data[s.i] == 'E') {
		s.i++
		if s.i < len(s.data) && (s.data[s.i] == '+' || s.data[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return s.fail("invalid number")
		}
	}
	return nil
}

func (s *scanner) literal(word string) error {
	if !bytes.HasPrefix(s.data[s.i:], []byte(word)) {
		return s.fail("invalid literal")
	}
	s.i += len(word)
	return nil
}

// unescape decodes the contents of a string the scanner accepted.
func unescape(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch raw[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(raw[i+2:])
			if 0xD800 <= r && r < 0xDC00 { // the scanner checked the pair
				lo, _ := hex4(raw[i+8:])
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default: // " \ /
			out = append(out, raw[i+1])
		}
		i += 2
	}
	return out
}

// shown is raw JSON cut short for an error message.
func shown(raw []byte) string {
	const limit = 40
	if len(raw) <= limit {
		return string(raw)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(raw[cut]) {
		cut--
	}
	return string(raw[:cut]) + "…"
}
