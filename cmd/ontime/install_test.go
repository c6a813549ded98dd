package main_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/cmd/ontime/internal/modproxy"
)

// TestGoInstallFromProxy: `go install github.com/ontime-go/ontime/cmd/ontime@V`
// works once the modules are published at V, the version cmd/ontime's
// go.mod requires of the library. The tree's two modules are published at V
// to a local module proxy (GOPROXY=file://…; other modules come from the
// module cache's download directory, or the usual proxy), and the binary is
// installed from it outside any work tree or workspace, into a throwaway
// module cache, as a user would: the install fails if the cmd module has a
// replace directive, requires a version that is not published, or does not
// build from its published files alone. The installed binary reports V.
// The checksum database is off: it cannot know these locally built zips
// (users' installs of the published modules are checked against it).
func TestGoInstallFromProxy(t *testing.T) {
	t.Parallel()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	version := requiredVersion(t, "go.mod", "github.com/ontime-go/ontime")
	var mods []modproxy.Module
	for _, dir := range []string{".", "kafkadelay", "kafkadelay/kafkadelayprom", "ontimeprom", "cmd/ontime"} {
		p, err := modproxy.ModulePath(filepath.Join(repo, dir))
		if err != nil {
			t.Fatal(err)
		}
		mods = append(mods, modproxy.Module{Path: p, Dir: dir})
	}
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	if err := modproxy.Build(repo, proxy, version, mods); err != nil {
		t.Fatal(err)
	}
	realCache := goEnv(t, "GOMODCACHE")
	upstream := goEnv(t, "GOPROXY")
	modcache := filepath.Join(tmp, "modcache")
	gobin := filepath.Join(tmp, "bin")
	work := filepath.Join(tmp, "elsewhere")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), "install", "-trimpath", "github.com/ontime-go/ontime/cmd/ontime@"+version)
	cmd.Dir = work
	cmd.Env = append(baseEnv(),
		"GOPROXY=file://"+proxy+",file://"+filepath.Join(realCache, "cache", "download")+","+upstream,
		"GOMODCACHE="+modcache, "GOBIN="+gobin, "GOFLAGS=-modcacherw",
		"GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go install …/cmd/ontime@%s: %v\n%s", version, err, out)
	}
	got, err := exec.Command(filepath.Join(gobin, "ontime"), "--version").Output()
	if err != nil {
		t.Fatalf("the installed ontime --version: %v", err)
	}
	if !strings.HasPrefix(string(got), "ontime "+version+" ") {
		t.Errorf("the installed ontime --version printed %q, want %q first", got, "ontime "+version)
	}
}

// requiredVersion returns the version a go.mod requires of module.
func requiredVersion(t *testing.T, gomod, module string) string {
	t.Helper()
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s does not require %s", gomod, module)
	return ""
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command(goTool(), "env", key).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestNoReplaceDirectives: a module users install must not have replace
// (or exclude) directives: `go install …@version` refuses it. Development
// resolves the library through go.work instead.
func TestNoReplaceDirectives(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "replace" || f[0] == "exclude") {
			t.Errorf("cmd/ontime/go.mod: %q", line)
		}
	}
	if v := requiredVersion(t, "go.mod", "github.com/ontime-go/ontime"); strings.HasPrefix(v, "v0.0.0-") {
		t.Errorf("cmd/ontime/go.mod requires the library at %s, a placeholder that is never published", v)
	}
}
