package cli

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// terminalSafe returns s with every rune a terminal could act on written as an
// escape: control characters other than the tab and newline the CLI lays its
// own output out with (ESC, CR, DEL, C1 such as CSI), format characters such
// as bidi overrides, and bytes that are not UTF-8 (as \xNN). Runes become
// \uXXXX (surrogate pairs above U+FFFF), so --json output stays JSON that
// decodes to the same string.
func terminalSafe(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !unsafeRune(r):
			b.WriteString(s[i : i+size])
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

func unsafeRune(r rune) bool { return r != '\t' && r != '\n' && !unicode.IsPrint(r) }

// terminalWriter passes everything written through terminalSafe: the one
// filter between what the store holds (names typed before they were checked,
// or written around the store) and the operator's terminal.
type terminalWriter struct{ w io.Writer }

func (t terminalWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, terminalSafe(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
