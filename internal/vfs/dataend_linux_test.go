package vfs

import (
	"path/filepath"
	"testing"
)

// DataEnd finds the first hole of a sparse file: where an index's preallocated, never-written
// tail begins.
func TestDataEndFindsTheFirstHole(t *testing.T) {
	f, err := Default.Create(filepath.Join(t.TempDir(), "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if end, ok := DataEnd(f); !ok || end != 0 {
		t.Fatalf("empty file: DataEnd = %d, %v", end, ok)
	}
	if _, err := f.WriteAt(make([]byte, 100), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10 << 20); err != nil {
		t.Fatal(err)
	}
	end, ok := DataEnd(f)
	if !ok {
		t.Fatal("DataEnd not supported by the OS file system")
	}
	if end == 10<<20 {
		t.Skip("this file system does not report holes (DataEnd is the size): nothing to check")
	}
	if end < 100 || end > 1<<20 {
		t.Fatalf("DataEnd = %d, want the end of the first written block", end)
	}
	if _, ok := DataEnd(NewMemFS().mustCreate(t)); ok {
		t.Fatal("MemFS files claim to know their holes")
	}
}

func (m *MemFS) mustCreate(t *testing.T) File {
	t.Helper()
	f, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	return f
}
