package segment

import (
	"errors"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// The replication checkpoints (replcheckpoint.go) are Kafka's text files, replaced atomically.
// These tests pin the exact bytes written, that what is written reads back equal, that a file
// that does not parse is a *BadCheckpointError naming its line, and that a crash at any step of
// the replacement leaves the old file or the new one.

func TestLeaderEpochCheckpointRoundTrip(t *testing.T) {
	fsys := vfs.NewMemFS()
	dir := "/data/t-0"
	mkdir(t, fsys, dir)
	if got, err := ReadLeaderEpochCheckpoint(fsys, dir); got != nil || err != nil {
		t.Fatalf("missing file: got %v, %v; want nil, nil", got, err)
	}
	for _, entries := range [][]EpochStart{
		{},
		{{Epoch: 0, StartOffset: 0}},
		{{0, 0}, {3, 100}, {4, 100}, {7, 123456789}, {math.MaxInt32, math.MaxInt64}},
	} {
		if err := WriteLeaderEpochCheckpoint(fsys, dir, entries); err != nil {
			t.Fatal(err)
		}
		got, err := ReadLeaderEpochCheckpoint(fsys, dir)
		if err != nil || got == nil || !slices.Equal(got, entries) {
			t.Fatalf("read back %v, %v; want %v", got, err, entries)
		}
	}
	b := readFileString(t, fsys, filepath.Join(dir, LeaderEpochCheckpointFile))
	if want := "0\n5\n0 0\n3 100\n4 100\n7 123456789\n2147483647 9223372036854775807\n"; b != want {
		t.Fatalf("file %q, want Kafka's format %q", b, want)
	}
}

func TestWriteLeaderEpochCheckpointRefusesDisorder(t *testing.T) {
	fsys := vfs.NewMemFS()
	mkdir(t, fsys, "/d")
	for _, entries := range [][]EpochStart{
		{{-1, 0}},
		{{0, -1}},
		{{3, 0}, {3, 10}},
		{{3, 10}, {2, 20}},
		{{3, 10}, {4, 9}},
	} {
		if err := WriteLeaderEpochCheckpoint(fsys, "/d", entries); err == nil {
			t.Errorf("%v: written, want refused", entries)
		}
	}
	if names, err := fsys.ReadDir("/d"); err != nil || len(names) != 0 {
		t.Fatalf("refused writes left %v (%v)", names, err)
	}
}

func TestOffsetCheckpointRoundTrip(t *testing.T) {
	fsys := vfs.NewMemFS()
	mkdir(t, fsys, "/data")
	path := "/data/" + OffsetCheckpointFile
	if got, err := ReadOffsetCheckpoint(fsys, path); got != nil || err != nil {
		t.Fatalf("missing file: got %v, %v; want nil, nil", got, err)
	}
	m := map[TopicPartition]batch.Offset{
		{"orders", 1}:                  42,
		{"orders", 0}:                  7,
		{"a.b_c-d", 2147483647}:        math.MaxInt64,
		{strings.Repeat("x", 249), 10}: 0,
	}
	for _, want := range []map[TopicPartition]batch.Offset{{}, m} {
		if err := WriteOffsetCheckpoint(fsys, path, want); err != nil {
			t.Fatal(err)
		}
		got, err := ReadOffsetCheckpoint(fsys, path)
		if err != nil || got == nil || !maps.Equal(got, want) {
			t.Fatalf("read back %v, %v; want %v", got, err, want)
		}
	}
	b := readFileString(t, fsys, path)
	if want := "0\n4\na.b_c-d 2147483647 9223372036854775807\norders 0 7\norders 1 42\n" + strings.Repeat("x", 249) + " 10 0\n"; b != want {
		t.Fatalf("file %q, want sorted Kafka format %q", b, want)
	}
	for _, bad := range []map[TopicPartition]batch.Offset{
		{{"", 0}: 1}, {{"a b", 0}: 1}, {{"a\nb", 0}: 1}, {{"t", -1}: 1}, {{"t", 0}: -1},
		{{strings.Repeat("x", 250), 0}: 1},
	} {
		if err := WriteOffsetCheckpoint(fsys, path, bad); err == nil {
			t.Errorf("%v: written, want refused", bad)
		}
	}
	if got, _ := ReadOffsetCheckpoint(fsys, path); !maps.Equal(got, m) {
		t.Fatalf("after refused writes the file holds %v, want %v", got, m)
	}
}

func TestCheckpointParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		offsets    bool
		line       int
	}{
		{"empty", "", false, 2},
		{"version only", "0\n", false, 2},
		{"version 1", "1\n0\n", false, 1},
		{"count not a number", "0\nx\n", false, 2},
		{"negative count", "0\n-1\n", false, 2},
		{"count above lines", "0\n2\n0 0\n", false, 0},
		{"count below lines", "0\n1\n0 0\n1 5\n", false, 0},
		{"missing entries", "0\n3\n", false, 3},
		{"three fields", "0\n1\n0 0 0\n", false, 3},
		{"epoch not a number", "0\n1\nx 0\n", false, 3},
		{"epoch overflow", "0\n1\n2147483648 0\n", false, 3},
		{"epoch decreasing", "0\n2\n5 0\n4 10\n", false, 4},
		{"offset decreasing", "0\n2\n4 10\n5 9\n", false, 4},
		{"blank line", "0\n2\n4 10\n\n", false, 4},
		{"offsets two fields", "0\n1\nt 0\n", true, 3},
		{"offsets duplicate", "0\n2\nt 0 1\nt 0 2\n", true, 4},
		{"offsets negative", "0\n1\nt 0 -2\n", true, 3},
		{"offsets partition overflow", "0\n1\nt 2147483648 0\n", true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewMemFS()
			path := "/d/" + LeaderEpochCheckpointFile
			if tc.offsets {
				path = "/d/" + OffsetCheckpointFile
			}
			writeFileString(t, fsys, path, tc.data)
			var err error
			if tc.offsets {
				_, err = ReadOffsetCheckpoint(fsys, path)
			} else {
				_, err = ReadLeaderEpochCheckpoint(fsys, "/d")
			}
			var bad *BadCheckpointError
			if !errors.As(err, &bad) || !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("error %v, want a *BadCheckpointError", err)
			}
			if bad.Path != path || bad.Line != tc.line {
				t.Fatalf("error names %s line %d, want %s line %d (%v)", bad.Path, bad.Line, path, tc.line, err)
			}
		})
	}
	// Kafka's reader takes a last line without its newline, and runs of blanks.
	fsys := vfs.NewMemFS()
	writeFileString(t, fsys, "/d/"+LeaderEpochCheckpointFile, "0\n2\n1  0\n2\t7")
	got, err := ReadLeaderEpochCheckpoint(fsys, "/d")
	if err != nil || !slices.Equal(got, []EpochStart{{1, 0}, {2, 7}}) {
		t.Fatalf("got %v, %v", got, err)
	}
}

// TestCheckpointCrashKeepsOldFile crashes the file system after each step of a replacement
// and checks that the restart reads the old entries or the new ones, never an error or a mix;
// a torn ".tmp" left beside the file is never read.
func TestCheckpointCrashKeepsOldFile(t *testing.T) {
	old := []EpochStart{{1, 0}, {2, 50}}
	next := []EpochStart{{1, 0}, {2, 50}, {5, 90}}
	steps := []vfs.Op{vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir}
	for i, failAt := range steps {
		for _, keepEntries := range []bool{false, true} {
			mem := vfs.NewMemFS()
			mkdir(t, mem, "/p")
			if err := WriteLeaderEpochCheckpoint(mem, "/p", old); err != nil {
				t.Fatal(err)
			}
			crashed := false
			efs := &vfs.ErrorFS{FS: mem, Inject: func(op vfs.Op, _ string) error {
				if op == failAt && !crashed {
					crashed = true
					return vfs.EIO
				}
				return nil
			}}
			err := WriteLeaderEpochCheckpoint(efs, "/p", next)
			if err == nil {
				t.Fatalf("step %v: write succeeded", failAt)
			}
			after := mem.Crash(vfs.CrashOptions{KeepUnsyncedEntries: keepEntries})
			got, err := ReadLeaderEpochCheckpoint(after, "/p")
			if err != nil {
				t.Fatalf("step %v: read after crash: %v", failAt, err)
			}
			// Only a failed SyncDir comes after the rename, and then either may survive.
			if !slices.Equal(got, old) && !(i == len(steps)-1 && slices.Equal(got, next)) {
				t.Fatalf("step %v keep=%v: read %v after the crash, want the old %v", failAt, keepEntries, got, old)
			}
		}
	}

	// A torn tmp file beside a good checkpoint is ignored by the reader and replaced by the
	// next write.
	mem := vfs.NewMemFS()
	mkdir(t, mem, "/d")
	path := "/d/" + OffsetCheckpointFile
	want := map[TopicPartition]batch.Offset{{"t", 0}: 10}
	if err := WriteOffsetCheckpoint(mem, path, want); err != nil {
		t.Fatal(err)
	}
	writeFileString(t, mem, path+".tmp", "0\n3\nt 0 1\x00\x17garbage")
	if got, err := ReadOffsetCheckpoint(mem, path); err != nil || !maps.Equal(got, want) {
		t.Fatalf("with a torn tmp: %v, %v; want %v", got, err, want)
	}
	want[TopicPartition{"t", 1}] = 3
	if err := WriteOffsetCheckpoint(mem, path, want); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadOffsetCheckpoint(mem.Crash(vfs.CrashOptions{}), path); err != nil || !maps.Equal(got, want) {
		t.Fatalf("after a crash following a complete write: %v, %v; want %v", got, err, want)
	}
}

// Fuzz targets for both parsers: never a panic, every refusal a *BadCheckpointError, and what
// is accepted satisfies the writer's rules and writes back to a file that reads equal.

func FuzzParseLeaderEpochCheckpoint(f *testing.F) {
	for _, s := range []string{"0\n0\n", "0\n2\n0 0\n3 100\n", "0\n1\n1 2", "0\n1\n-1 0\n", "1\n0\n", "0\n99999999999\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseLeaderEpochCheckpoint("f", data)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("error %v is not ErrBadCheckpoint", err)
			}
			return
		}
		fsys := vfs.NewMemFS()
		mkdir(t, fsys, "/d")
		if err := WriteLeaderEpochCheckpoint(fsys, "/d", got); err != nil {
			t.Fatalf("accepted %v that the writer refuses: %v", got, err)
		}
		again, err := ReadLeaderEpochCheckpoint(fsys, "/d")
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("rewritten %v reads %v, %v", got, again, err)
		}
	})
}

func FuzzParseOffsetCheckpoint(f *testing.F) {
	for _, s := range []string{"0\n0\n", "0\n2\nt 0 5\nu 3 9\n", "0\n1\nt 0 5", "0\n2\nt 0 5\nt 0 6\n", "0\n1\n\x00 0 0\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseOffsetCheckpoint("f", data)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("error %v is not ErrBadCheckpoint", err)
			}
			return
		}
		fsys := vfs.NewMemFS()
		mkdir(t, fsys, "/")
		if err := WriteOffsetCheckpoint(fsys, "/f", got); err != nil {
			t.Fatalf("accepted %v that the writer refuses: %v", got, err)
		}
		again, err := ReadOffsetCheckpoint(fsys, "/f")
		if err != nil || !maps.Equal(again, got) {
			t.Fatalf("rewritten %v reads %v, %v", got, again, err)
		}
	})
}

func mkdir(t *testing.T, fsys vfs.FS, dir string) {
	t.Helper()
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFileString(t *testing.T, fsys vfs.FS, path, data string) {
	t.Helper()
	if err := fsys.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create(path)
	if err == nil {
		_, err = f.WriteAt([]byte(data), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = fsys.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		t.Fatal(err)
	}
}

func readFileString(t *testing.T, fsys vfs.FS, path string) string {
	t.Helper()
	f, err := fsys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, _ := f.Size()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && n > 0 {
		t.Fatal(err)
	}
	return string(b)
}
