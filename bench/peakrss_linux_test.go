package bench

import (
	"runtime"
	"testing"
)

// ReleaseMemory starts the process's peak RSS again, so that a run after a memory-hungry one
// (compare's kfake) does not report its predecessor's peak.
func TestReleaseMemoryResetsPeakRSS(t *testing.T) {
	const size = 256 << 20
	hog := make([]byte, size)
	for i := 0; i < len(hog); i += 4096 {
		hog[i] = 1 // resident, not just reserved
	}
	before, _ := MemoryMB()
	if before < size/1e6 {
		t.Skipf("peak RSS %.0f MB after touching %d MB: no VmHWM here", before, size>>20)
	}
	runtime.KeepAlive(hog)
	hog = nil
	ReleaseMemory()
	after, _ := MemoryMB()
	if after > before-size/2/1e6 {
		t.Fatalf("peak RSS %.0f MB after ReleaseMemory, %.0f MB before: the %d MB freed still counts", after, before, size>>20)
	}
}
