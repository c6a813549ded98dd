//go:build !linux

package redistest

import "os/exec"

// setDeathSignal does nothing outside Linux: there, Main stops the server.
func setDeathSignal(*exec.Cmd) {}
