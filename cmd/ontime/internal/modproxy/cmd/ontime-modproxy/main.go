// Command ontime-modproxy writes a Go module proxy directory (for
// GOPROXY=file://DIR) holding this repository's modules at one version,
// built from the work tree. The Makefile's tidy check and the release steps
// of docs/releasing.md use it.
//
//	go run ./cmd/ontime/internal/modproxy/cmd/ontime-modproxy -repo . -out /tmp/proxy -version v0.1.0
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ontime-go/ontime/cmd/ontime/internal/modproxy"
)

func main() {
	repo := flag.String("repo", ".", "repository root")
	out := flag.String("out", "", "proxy directory to write (required)")
	version := flag.String("version", "", "version of every module (required), e.g. v0.1.0")
	flag.Parse()
	if *out == "" || *version == "" {
		fmt.Fprintln(os.Stderr, "usage: ontime-modproxy -out DIR -version vX.Y.Z [-repo DIR] [module dirs...]")
		os.Exit(2)
	}
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{".", "kafkadelay", "kafkadelay/kafkadelayprom", "ontimeprom", "ontimeotel", "cmd/ontime"}
	}
	var mods []modproxy.Module
	for _, d := range dirs {
		p, err := modproxy.ModulePath(filepath.Join(*repo, d))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		mods = append(mods, modproxy.Module{Path: p, Dir: d})
	}
	if err := modproxy.Build(*repo, *out, *version, mods); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
