package main_test

import (
	"os/exec"
	"syscall"
)

// childAttr makes a child die with the test process, so that no server or
// watcher outlives a crashed test.
func childAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
