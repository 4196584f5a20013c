//go:build !linux

package chaos

import "syscall"

// childAttr is nil where there is no parent-death signal: a harness killed by SIGKILL leaves
// its brokers running there.
func childAttr() *syscall.SysProcAttr { return nil }
