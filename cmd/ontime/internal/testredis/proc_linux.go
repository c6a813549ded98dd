package testredis

import "syscall"

// procAttr kills redis-server when the test process dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
