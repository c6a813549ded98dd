//go:build !linux

package ontimebolt

import "os"

// noReadahead is a no-op where posix_fadvise is not available to Go.
func noReadahead(*os.File) {}
