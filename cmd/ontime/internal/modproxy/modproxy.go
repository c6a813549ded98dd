// Package modproxy builds a Go module proxy in a directory (the layout
// GOPROXY=file://DIR reads: module/@v/list, .info, .mod, .zip) from the
// modules of a work tree, so that `go install …/cmd/ontime@VERSION` and
// `go mod tidy` of the cmd module can be checked before a version is
// published. Each module's zip holds its files that git tracks or would
// track (not ignored), without nested modules, as the go command's own
// module zips do (golang.org/x/mod/zip rules: no vendor directories, no
// .git, regular files only).
package modproxy

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Module is a module of the work tree to publish.
type Module struct {
	// Path is the module path (from its go.mod).
	Path string
	// Dir is the module's directory, relative to the repository root
	// ("." for the root module).
	Dir string
}

// Build writes every module at version into the proxy directory out
// (created if needed; a version already there is replaced). repo is the
// repository root.
func Build(repo, out, version string, mods []Module) error {
	files, err := gitFiles(repo)
	if err != nil {
		return err
	}
	var modDirs []string // every directory with a go.mod, for nested-module exclusion
	for _, f := range files {
		if path.Base(f) == "go.mod" {
			modDirs = append(modDirs, path.Dir(f))
		}
	}
	for _, m := range mods {
		if err := buildOne(repo, out, version, m, files, modDirs); err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
	}
	return nil
}

// ModulePath reads the module path of dir/go.mod.
func ModulePath(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod has no module line", dir)
}

// gitFiles lists the repository's files (slash-separated, relative to
// repo) that exist: tracked, or untracked and not ignored.
func gitFiles(repo string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %v: %s", err, stderr.String())
	}
	var files []string
	for _, f := range strings.Split(string(outb), "\x00") {
		if f == "" {
			continue
		}
		fi, err := os.Lstat(filepath.Join(repo, filepath.FromSlash(f)))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a symlink
		}
		files = append(files, f)
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

func buildOne(repo, out, version string, m Module, files, modDirs []string) error {
	dir := path.Clean(filepath.ToSlash(m.Dir))
	inModule := func(f string) (string, bool) {
		rel := f
		if dir != "." {
			var ok bool
			if rel, ok = strings.CutPrefix(f, dir+"/"); !ok {
				return "", false
			}
		}
		// Not in a nested module.
		for _, md := range modDirs {
			if md != dir && (dir == "." || strings.HasPrefix(md, dir+"/")) && strings.HasPrefix(f, md+"/") {
				return "", false
			}
		}
		for _, seg := range strings.Split(rel, "/") {
			if seg == "vendor" || seg == ".git" || seg == ".hg" {
				return "", false
			}
		}
		return rel, true
	}
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	prefix := m.Path + "@" + version + "/"
	var gomod []byte
	for _, f := range files {
		rel, ok := inModule(f)
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(f)))
		if err != nil {
			return err
		}
		if rel == "go.mod" {
			gomod = data
		}
		w, err := zw.Create(prefix + rel)
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if gomod == nil {
		return errors.New("no go.mod in the module's directory")
	}
	vdir := filepath.Join(out, filepath.FromSlash(escapePath(m.Path)), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Truncate(time.Second)})
	for name, data := range map[string][]byte{
		version + ".info": info,
		version + ".mod":  gomod,
		version + ".zip":  zbuf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return err
		}
	}
	return addToList(filepath.Join(vdir, "list"), version)
}

func addToList(file, version string) error {
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	vs := strings.Fields(string(data))
	if !slices.Contains(vs, version) {
		vs = append(vs, version)
	}
	return os.WriteFile(file, []byte(strings.Join(vs, "\n")+"\n"), 0o644)
}

// escapePath is the proxy's case encoding of a module path: each upper-case
// letter becomes '!' and its lower case.
func escapePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
