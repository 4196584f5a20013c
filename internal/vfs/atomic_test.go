package vfs

import (
	"io"
	"sync/atomic"
	"testing"
)

func readAllOf(t *testing.T, fsys FS, path string) (string, bool) {
	t.Helper()
	f, err := fsys.Open(path)
	if err != nil { // not there (the crash tests read what may be gone)
		return "", false
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return string(b), true
}

// TestWriteFileAtomicAndReplaceFile: both replace a file's contents through a temp file and a
// rename; WriteFileAtomic syncs the file and the directory, so its file survives a crash,
// and ReplaceFile syncs nothing.
func TestWriteFileAtomicAndReplaceFile(t *testing.T) {
	for _, c := range []struct {
		name    string
		write   func(FS, string, []byte) error
		syncs   int64 // file syncs and directory syncs per write
		durable bool
	}{
		{"WriteFileAtomic", WriteFileAtomic, 2, true},
		{"ReplaceFile", ReplaceFile, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := NewMemFS()
			if err := m.MkdirAll("/d", 0o755); err != nil {
				t.Fatal(err)
			}
			var counts [NumOps]atomic.Int64
			fsys := &ErrorFS{FS: m, Inject: Count(&counts)}
			for _, v := range []string{"first", "second, longer"} {
				if err := c.write(fsys, "/d/f", []byte(v)); err != nil {
					t.Fatal(err)
				}
				if got, _ := readAllOf(t, m, "/d/f"); got != v {
					t.Fatalf("after writing %q the file holds %q", v, got)
				}
			}
			if _, ok := readAllOf(t, m, "/d/f.tmp"); ok {
				t.Fatal("the temp file is left behind")
			}
			if got := counts[OpSync].Load() + counts[OpSyncDir].Load(); got != 2*c.syncs {
				t.Fatalf("%d syncs for two writes, want %d", got, 2*c.syncs)
			}
			got, ok := readAllOf(t, m.Crash(CrashOptions{}), "/d/f")
			if c.durable && got != "second, longer" {
				t.Fatalf("after a crash the file holds %q (there: %v)", got, ok)
			}
			if !c.durable && ok && got != "" && got != "first" && got != "second, longer" {
				t.Fatalf("after a crash the file holds %q: neither version, nor empty", got)
			}
		})
	}
}
