package report

import (
	"runtime"
	"testing"
)

func TestDetectMachine(t *testing.T) {
	dir := t.TempDir()
	m := DetectMachine(dir)
	if m.Cores != runtime.NumCPU() || m.OS != runtime.GOOS || m.Arch != runtime.GOARCH || m.Dir != dir {
		t.Errorf("DetectMachine = %+v", m)
	}
	if runtime.GOOS == "linux" && (m.MemoryBytes == 0 || m.Kernel == "" || m.Filesystem == "") {
		t.Errorf("on Linux, want the memory, the kernel and the file system: %+v", m)
	}
	if s := m.Settings(); s[0].Key != "cores" {
		t.Errorf("Settings = %v", s)
	}
}
