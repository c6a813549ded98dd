package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/term"
)

// output is the standard output of a verb that prints stored data (ids,
// bodies, headers, errors). Written to a terminal, each such field is
// escaped (EscapeTerminal) so that a message cannot move the cursor,
// retitle the window or recolour it; --raw, --json and output that is not
// a terminal (a pipe, a file) keep the exact bytes.
type output struct {
	w      io.Writer
	escape bool
}

func newOutput(e *env, raw bool) output {
	return output{w: e.stdout, escape: !raw && isTerminal(e.stdout)}
}

// s returns a stored value as it may be printed.
func (o output) s(v string) string {
	if !o.escape {
		return v
	}
	return EscapeTerminal(v)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// EscapeTerminal returns s with every character a terminal would act on
// rather than show written as a Go-style escape: C0 and C1 control
// characters (ESC as \x1b, BEL as \x07, line breaks as \n and \r, tab as
// \t), DEL, Unicode format characters such as bidirectional overrides
// (\u202e), line and paragraph separators, and bytes that are not UTF-8
// (\xff). Letters, marks, digits, punctuation, symbols and spaces stay as
// they are.
func EscapeTerminal(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case unicode.IsGraphic(r):
			b.WriteString(s[i : i+size])
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += size
	}
	return b.String()
}

func isPlain(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !unicode.IsGraphic(r) {
			return false
		}
		i += size
	}
	return true
}
