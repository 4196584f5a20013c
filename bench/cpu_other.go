//go:build !unix

package bench

import "time"

// processCPU reports no CPU time where getrusage is missing; runs then report none.
func processCPU() (time.Duration, bool) { return 0, false }
