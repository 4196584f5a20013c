//go:build !linux

package bench

// resetPeakRSS: MemoryMB reports no peak RSS here.
func resetPeakRSS() {}
