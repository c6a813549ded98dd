package cli

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the version `ontime --version` prints: the module version
// the binary was built from (v1.2.3 when installed with `go install
// …/cmd/ontime@v1.2.3`, "devel" for a build from a work tree, with the VCS
// revision when the build recorded one), the Go version and the platform.
func Version() string {
	return version(debug.ReadBuildInfo())
}

func version(bi *debug.BuildInfo, ok bool) string {
	v := "devel"
	if ok {
		if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
			v = mv
		}
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = "-dirty"
				}
			}
		}
		if v == "devel" && rev != "" {
			v += "+" + rev[:min(12, len(rev))] + modified
		}
	}
	return strings.Join([]string{v, runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH}, " ")
}
