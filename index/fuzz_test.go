package index

import (
	"encoding/binary"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// FuzzOpen loads arbitrary bytes as offset and time index files: opening, checking, looking up,
// appending and truncating never panic, and an index that passes Check answers lookups with
// entries that are really in it.
func FuzzOpen(f *testing.F) {
	good := make([]byte, 0, 64)
	for i := 1; i <= 8; i++ {
		good = binary.BigEndian.AppendUint32(good, uint32(i*3))
		good = binary.BigEndian.AppendUint32(good, uint32(i*100))
	}
	f.Add(good, int64(5), uint16(1000))
	f.Add(make([]byte, 48), int64(0), uint16(0))
	f.Add([]byte{1, 2, 3}, int64(-1), uint16(7))
	f.Fuzz(func(t *testing.T, data []byte, target int64, logSize uint16) {
		if len(data) > 1<<16 {
			return
		}
		for _, writable := range []bool{false, true} {
			m := vfs.NewMemFS()
			_ = m.MkdirAll("/x", 0o755)
			for _, name := range []string{"/x/a.index", "/x/a.timeindex"} {
				file, _ := m.Create(name)
				_, _ = file.WriteAt(data, 0)
			}
			const base = 1000
			if x, err := OpenOffsetIndex(m, "/x/a.index", base, 4096, writable); err == nil {
				sane := x.Check(int64(logSize)) == nil
				e := x.Lookup(batch.Offset(target))
				if sane && e.Offset > batch.Offset(target) && e.Offset != base {
					t.Fatalf("Lookup(%d) = %+v on a sane index", target, e)
				}
				_ = x.LookupPos(Pos(uint32(target)))
				_ = x.Append(batch.Offset(target), Pos(logSize))
				_ = x.TruncateTo(batch.Offset(target))
				_ = x.Trim()
				_ = x.Close()
			}
			if x, err := OpenTimeIndex(m, "/x/a.timeindex", base, 4096, writable); err == nil {
				sane := x.Check(batch.Offset(base+int64(logSize))) == nil
				e := x.Lookup(target)
				if sane && e.Timestamp >= target && e.Timestamp != -1 {
					t.Fatalf("time Lookup(%d) = %+v on a sane index", target, e)
				}
				_, _ = x.Append(target, batch.Offset(base+int64(logSize)))
				_ = x.TruncateTo(batch.Offset(target))
				_ = x.Close()
			}
		}
	})
}
