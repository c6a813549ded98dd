//go:build !linux

package harness

import "syscall"

// setDeathSignal is a no-op outside Linux: servers are stopped by Run.
func setDeathSignal(*syscall.SysProcAttr) {}
