package localhost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("ports %v: want 6 distinct valid ports", ports)
		}
		seen[p] = true
	}
}

func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("a\nb\nc\nd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := LogTail(path, 2); got != "c\nd" {
		t.Errorf("LogTail(2) = %q, want %q", got, "c\nd")
	}
	if got := LogTail(path, 10); got != "a\nb\nc\nd" {
		t.Errorf("LogTail(10) = %q", got)
	}
	if got := LogTail(filepath.Join(t.TempDir(), "missing"), 2); !strings.HasPrefix(got, "(") {
		t.Errorf("LogTail of a missing file = %q, want the reason in parentheses", got)
	}
}
