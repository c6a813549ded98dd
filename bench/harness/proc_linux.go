package harness

import (
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// setDeathSignal makes the kernel SIGKILL a server the harness started when
// the harness dies, so an interrupted run leaks no redis-server or postgres.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// procCPU returns the CPU time (user + system) process pid has used, in
// seconds, from /proc/pid/stat; NaN when it cannot be read.
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return math.NaN()
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return math.NaN()
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return math.NaN()
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return math.NaN()
	}
	return (u + st) / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/pid/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100
