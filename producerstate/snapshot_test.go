package producerstate

import (
	"errors"
	"runtime"
	"testing"

	"github.com/sluicemq/sluice/batch"
)

func sampleState() *State {
	s := New()
	for id := int64(0); id < 20; id++ {
		for i := int32(0); i < int32(id%8); i++ {
			b := info(id*3, int16(id%3), i*4, 4, batch.Offset(id*100)+batch.Offset(i)*4)
			b.MaxTimestamp = 1_700_000_000_000 + id
			s.Update(b)
		}
	}
	return s
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, s := range []*State{New(), sampleState()} {
		data := s.AppendSnapshot([]byte("prefix"), 5000)
		got, off, err := DecodeSnapshot(data[len("prefix"):])
		if err != nil {
			t.Fatal(err)
		}
		if off != 5000 || !equalEntries(got.Entries(), s.Entries()) {
			t.Fatalf("round trip: offset %d, entries\n%+v\nwant\n%+v", off, got.Entries(), s.Entries())
		}
		// The decoded state decides as the original does.
		for _, e := range s.Entries() {
			if len(e.Runs) == 0 {
				continue
			}
			last := e.Runs[len(e.Runs)-1]
			dup := BatchInfo{ProducerID: e.ProducerID, ProducerEpoch: e.Epoch, FirstSeq: last.FirstSeq, LastSeq: last.LastSeq}
			if v, err := got.Check([]BatchInfo{dup}); err != nil || !v.Duplicate || v.FirstOffset != last.FirstOffset {
				t.Fatalf("producer %d's last batch after a round trip: %+v, %v", e.ProducerID, v, err)
			}
		}
	}
}

func TestSnapshotCorruption(t *testing.T) {
	good := sampleState().AppendSnapshot(nil, 5000)
	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[i] ^= 0x40
		return b
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"header cut", good[:snapshotHeader-1]},
		{"torn", good[:len(good)-7]},
		{"trailing bytes", append(append([]byte(nil), good...), 0)},
		{"bad magic", flip(0)},
		{"bad version", flip(5)},
		{"bad crc", flip(7)},
		{"bit flip in an entry", flip(snapshotHeader + 3)},
		{"bit flip at the end", flip(len(good) - 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := DecodeSnapshot(c.data); !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("DecodeSnapshot = %v, want ErrCorruptSnapshot", err)
			}
		})
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(New().AppendSnapshot(nil, 0))
	f.Add(sampleState().AppendSnapshot(nil, 5000))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, off, err := DecodeSnapshot(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error %v is not ErrCorruptSnapshot", err)
			}
			return
		}
		// What decodes encodes back to the same bytes (the format has one encoding).
		if again := s.AppendSnapshot(nil, off); string(again) != string(data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, data)
		}
	})
}

// BenchmarkCheck is the leader's per-batch cost: one producer among 10,000, next in sequence.
func BenchmarkCheck(b *testing.B) {
	s := New()
	for id := int64(0); id < 10000; id++ {
		s.Update(info(id, 0, 0, 10, batch.Offset(id*10)))
	}
	bs := []BatchInfo{info(4321, 0, 10, 10, 100000)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Check(bs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdate is the per-batch cost of recording a batch (leader, follower, replay).
func BenchmarkUpdate(b *testing.B) {
	s := New()
	for id := int64(0); id < 10000; id++ {
		s.Update(info(id, 0, 0, 10, batch.Offset(id*10)))
	}
	b.ReportAllocs()
	seq := int32(10)
	for b.Loop() {
		s.Update(info(4321, 0, seq, 10, 100000))
		seq += 10
	}
}

// BenchmarkMemory10000Producers reports the heap a partition's state holds for 10,000 idle
// producers, each with a full window of runs.
func BenchmarkMemory10000Producers(b *testing.B) { memory10000(b, Window) }

func memory10000(b *testing.B, batches int32) {
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := New()
		for id := int64(0); id < 10000; id++ {
			for i := int32(0); i < batches; i++ { // a gap between batches: a run each
				s.Update(info(id, 0, i, 1, batch.Offset(id*100)+batch.Offset(2*i)))
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc), "heap-bytes/10k-producers")
		runtime.KeepAlive(s)
	}
}
