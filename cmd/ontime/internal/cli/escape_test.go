package cli

import "testing"

func TestEscapeTerminal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"plain text, café ☕ 日本語 and spaces\u00a0\u3000", "plain text, café ☕ 日本語 and spaces\u00a0\u3000"},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"a\nb\rc\td", `a\nb\rc\td`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{"c1 csi \u009b2J", `c1 csi \u009b2J`},
		{"bidi \u202eevil\u2066", `bidi \u202eevil\u2066`},
		{"zero\u200bwidth", `zero\u200bwidth`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad utf-8 \xff\xfe", `bad utf-8 \xff\xfe`},
		{"replacement char \ufffd stays", "replacement char \ufffd stays"},
		{`back\slash`, `back\slash`},
		{"tag \U000e0041", `tag \U000e0041`},
	} {
		if got := EscapeTerminal(c.in); got != c.want {
			t.Errorf("EscapeTerminal(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
