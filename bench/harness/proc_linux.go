package harness

import "syscall"

// setDeathSignal makes the kernel SIGKILL a server the harness started when
// the harness dies, so an interrupted run leaks no redis-server or postgres.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
