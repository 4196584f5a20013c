//go:build !linux

package bench

import "time"

// childCPU is not read outside Linux: runs against a broker process report no broker CPU.
func childCPU(int) (time.Duration, bool) { return 0, false }
