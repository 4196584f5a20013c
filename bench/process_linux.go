package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// childAttr makes the broker process get SIGTERM when the bench dies, even by SIGKILL, which
// leaves it no chance to stop the child itself. Linux sends it when the thread that started the
// child exits; Go ends a thread only when a goroutine locked to it exits, and the bench locks
// none, so in practice that is when the bench process ends.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} }

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux architecture.
const clockTicks = 100

// childCPU reads a process's user and system CPU time from /proc/<pid>/stat.
func childCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}
