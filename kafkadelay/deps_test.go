package kafkadelay_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The producer side pulls no TOML decoder: the package's dependencies (go
// list -deps) hold no toml package; the configuration package, which does
// decode TOML, is the check that this one can fail.
func TestNoTOMLDecoderInProducer(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("the go command is not on PATH")
	}
	deps := func(pkg string) []string {
		out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	toml := func(ps []string) (found []string) {
		for _, p := range ps {
			if strings.Contains(strings.ToLower(p), "toml") {
				found = append(found, p)
			}
		}
		return found
	}
	if got := toml(deps("github.com/ontime-go/ontime/kafkadelay")); len(got) != 0 {
		t.Errorf("kafkadelay imports a TOML decoder: %v", got)
	}
	if got := toml(deps("github.com/ontime-go/ontime/kafkadelay/kafkaconfig")); len(got) == 0 {
		t.Error("kafkaconfig's dependencies hold no toml package: the check above proves nothing")
	}
}
