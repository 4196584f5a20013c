//go:build !linux

package bench

import (
	"syscall"
	"time"
)

// childAttr: elsewhere than Linux a broker process outlives a bench killed by SIGKILL.
func childAttr() *syscall.SysProcAttr { return nil }

// childCPU is not read outside Linux: runs against a broker process report no broker CPU.
func childCPU(int) (time.Duration, bool) { return 0, false }
