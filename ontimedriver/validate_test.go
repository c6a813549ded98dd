package ontimedriver

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestMatchTopic(t *testing.T) {
	for _, c := range []struct {
		pattern, topic string
		want           bool
	}{
		{"*", "a", true},
		{"*", "tenant-1", true},
		{"tenant-*", "tenant-1", true},
		{"tenant-*", "tenant-", true},
		{"tenant-*", "tenant", false},
		{"tenant-*", "x-tenant-1", false},
		{"*-eu", "a-eu", true},
		{"*-eu", "a-eu-2", false},
		{"t?", "t1", true},
		{"t?", "t12", false},
		{"a*b*c", "a1b2c", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "acb", false},
		{"a*b*c", "ab1b1c1c", true},
		{"exact", "exact", true},
		{"exact", "exacT", false},
		{"**", "", true},
	} {
		if got := MatchTopic(c.pattern, c.topic); got != c.want {
			t.Errorf("MatchTopic(%q, %q) = %v, want %v", c.pattern, c.topic, got, c.want)
		}
	}
}

func TestValidatePattern(t *testing.T) {
	for _, ok := range []string{"*", "tenant-*", "a?b", "orders.*.eu", "x"} {
		if err := ValidatePattern(ok); err != nil {
			t.Errorf("ValidatePattern(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b*", "{x}*", "[ab]"} {
		if err := ValidatePattern(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidatePattern(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

// MatchTopic agrees with a regular expression built from the pattern
// ('*' → ".*", '?' → ".", everything else literal), on any input.
func FuzzMatchTopic(f *testing.F) {
	for _, s := range [][2]string{{"*", "a"}, {"tenant-*", "tenant-1"}, {"a*b*c", "ab1b1c1c"}, {"t?", "t12"}, {"**?", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, topic string) {
		var re strings.Builder
		re.WriteString("^")
		for _, r := range pattern {
			switch r {
			case '*':
				re.WriteString("(?s:.*)")
			case '?':
				re.WriteString("(?s:.)")
			default:
				re.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		re.WriteString("$")
		// Byte-wise like MatchTopic: compare on valid topics' alphabet
		// (ASCII), where a rune is a byte.
		for i := 0; i < len(pattern); i++ {
			if pattern[i] >= 0x80 {
				return
			}
		}
		for i := 0; i < len(topic); i++ {
			if topic[i] >= 0x80 {
				return
			}
		}
		want := regexp.MustCompile(re.String()).MatchString(topic)
		if got := MatchTopic(pattern, topic); got != want {
			t.Fatalf("MatchTopic(%q, %q) = %v, want %v", pattern, topic, got, want)
		}
	})
}
