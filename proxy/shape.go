package proxy

import (
	"strings"

	"github.com/tollgate/tollgate/proxy/apikey"
)

// maxDecodings is how many rounds of percent-decoding the gateway follows when
// it looks for separators in a path or a key in a query. An upstream or a proxy
// in front of it may decode more than once, so each round is checked; past this
// many the input is refused rather than followed further.
const maxDecodings = 3

var (
	errDotSegment = &Error{Kind: KindInvalidRequest, Message: "request path must not contain . or .. segments, encoded or not"}
	errEncodedSep = &Error{Kind: KindInvalidRequest, Message: "request path must not contain an encoded / or \\ (%2F, %5C)"}
	errDeepEncode = &Error{Kind: KindInvalidRequest, Message: "request path is percent-encoded too many times"}
)

// checkPath refuses an escaped path that, decoded once or a few times, names
// another place than it seems to: a "." or ".." segment, a "/" that was not a
// separator on the wire, or any "\" (which some servers take for "/"). The
// caller passes exactly the string the gateway forwards (URL.EscapedPath), so
// what is checked is what the upstream receives. A path with no '%', '.' or '\'
// costs one scan and no allocation.
func checkPath(p string) *Error {
	if !strings.ContainsAny(p, "%.\\") {
		return nil
	}
	if hasDotSegment(p) {
		return errDotSegment
	}
	slashes := strings.Count(p, "/")
	for range maxDecodings {
		d, changed := unescapeLenient(p)
		if !changed {
			return nil
		}
		if strings.Count(d, "/") != slashes || strings.ContainsRune(d, '\\') {
			return errEncodedSep
		}
		if hasDotSegment(d) {
			return errDotSegment
		}
		p = d
	}
	if _, changed := unescapeLenient(p); changed {
		return errDeepEncode
	}
	return nil
}

// hasDotSegment finds "." and ".." segments, also with a ";param" after them
// (servlet containers read "..;" as ".."), which an upstream or an
// intermediary could resolve into another route's path.
func hasDotSegment(p string) bool {
	for p != "" {
		seg, rest, _ := strings.Cut(p, "/")
		seg, _, _ = strings.Cut(seg, ";")
		if seg == "." || seg == ".." {
			return true
		}
		p = rest
	}
	return false
}

// keyInQuery reports whether the raw query string carries a member key in any
// percent-encoding: as sent, or after each round of decoding, in a parameter's
// name or value alike. A query still decoding further after maxDecodings rounds
// counts as one: nothing legitimate is encoded that deep.
func keyInQuery(raw string) bool {
	for range maxDecodings + 1 {
		if apikey.LooksLikeKey(raw) {
			return true
		}
		d, changed := unescapeLenient(raw)
		if !changed {
			return false
		}
		raw = d
	}
	return true
}

// unescapeLenient decodes every valid %XX in s and leaves anything else as it
// is, as a forgiving server would; an invalid escape elsewhere cannot then hide
// the ones that decode. changed is false, and nothing allocated, when s has no
// valid escape.
func unescapeLenient(s string) (string, bool) {
	first := -1
	for i := strings.IndexByte(s, '%'); i >= 0 && i+2 < len(s); {
		if isHex(s[i+1]) && isHex(s[i+2]) {
			first = i
			break
		}
		next := strings.IndexByte(s[i+1:], '%')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	if first < 0 {
		return s, false
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:first]...)
	for i := first; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b), true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
