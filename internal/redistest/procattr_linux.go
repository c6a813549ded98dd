package redistest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal asks the kernel to SIGKILL the server when the process that
// started it dies, so a crashed or killed test binary leaks no redis-server.
// (Pdeathsig fires when the starting OS thread exits; Go keeps its threads
// unless a goroutine exits while locked to one, which tests do not do.)
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
