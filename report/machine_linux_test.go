//go:build linux

package report

import "testing"

func TestParseMemTotal(t *testing.T) {
	in := []byte("MemFree:         123 kB\nMemTotal:       16318412 kB\nBuffers: 1 kB\n")
	if got := parseMemTotal(in); got != 16318412*1024 {
		t.Errorf("parseMemTotal = %d", got)
	}
	if got := parseMemTotal([]byte("MemFree: 1 kB\n")); got != 0 {
		t.Errorf("parseMemTotal without MemTotal = %d", got)
	}
	if fsTypeName(0xef53) != "ext4" || fsTypeName(0x1234) != "0x1234" {
		t.Error("fsTypeName")
	}
}
