package store

import (
	"unicode"
	"unicode/utf8"
)

// checkText refuses, in anything a person types as a name (an email, a key or
// team name, a route prefix or upstream, a model), what could act on a
// terminal or disguise the name where it is shown: control characters (C0,
// DEL, C1), the bidirectional-text controls that reorder the text after them,
// and bytes that are not UTF-8. what names the field in the message.
func checkText(field, what, s string) error {
	if err := CheckUTF8(field, what, s); err != nil {
		return err
	}
	for _, r := range s {
		if unicode.IsControl(r) || bidiControl(r) {
			return invalid(field, "%s must not contain control or bidirectional-text characters (it has %U)", what, r)
		}
	}
	return nil
}

// bidiControl reports the Unicode bidirectional formatting characters:
// embeddings and overrides (U+202A–U+202E), isolates (U+2066–U+2069) and the
// marks (U+200E, U+200F, U+061C).
func bidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// CheckUTF8 refuses s, the value of field, unless it is UTF-8: a surface that
// reads input the store never sees as typed (the admin API's JSON decoder
// turns such bytes into U+FFFD) refuses it with this, so every surface says
// the same.
func CheckUTF8(field, what, s string) error {
	if !utf8.ValidString(s) {
		return invalid(field, "%s is not valid UTF-8", what)
	}
	return nil
}
