package ontimedriver

import (
	"errors"
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
