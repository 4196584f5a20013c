package bench

import "os"

// resetPeakRSS makes the process's peak resident set (VmHWM, which MemoryMB reports) start
// again from what is resident now (Linux 4.0+, /proc/PID/clear_refs "5"), so that a run's
// peak is its own and not that of a run before it in the same process (compare's kfake holds
// a gigabyte). Best effort: an error leaves the peak as it was.
func resetPeakRSS() {
	f, err := os.OpenFile("/proc/self/clear_refs", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	_, _ = f.WriteString("5")
	_ = f.Close()
}
