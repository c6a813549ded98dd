//go:build !linux

package harness

import (
	"math"
	"syscall"
)

// setDeathSignal is a no-op outside Linux: servers are stopped by Run.
func setDeathSignal(*syscall.SysProcAttr) {}

// procCPU is not measured outside Linux.
func procCPU(int) float64 { return math.NaN() }
