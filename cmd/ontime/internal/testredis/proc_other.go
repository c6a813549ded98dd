//go:build !linux

package testredis

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }
