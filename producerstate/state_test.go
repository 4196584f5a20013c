package producerstate

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
)

// info is a batch of producer pid at epoch, n records from sequence first, at offset off.
func info(pid int64, epoch int16, first, n int32, off batch.Offset) BatchInfo {
	return BatchInfo{
		ProducerID: pid, ProducerEpoch: epoch, FirstSeq: first, LastSeq: addSeq(first, n-1),
		FirstOffset: off, LastOffset: off + batch.Offset(n) - 1, MaxTimestamp: 1000,
	}
}

func TestAddSeq(t *testing.T) {
	for _, c := range []struct{ s, n, want int32 }{
		{0, 0, 0}, {0, 9, 9}, {math.MaxInt32 - 1, 1, math.MaxInt32},
		{math.MaxInt32, 1, 0}, {math.MaxInt32 - 2, 5, 2}, {-1, 1, -1},
	} {
		if got := addSeq(c.s, c.n); got != c.want {
			t.Errorf("addSeq(%d, %d) = %d, want %d", c.s, c.n, got, c.want)
		}
	}
}

func TestCheckRules(t *testing.T) {
	// The state in every case: producer 7 at epoch 2 has appended 3 batches of 10 records
	// (sequences 0..29) at offsets 100..129, one run; producer 8 at epoch 0 one batch ending
	// at MaxInt32; producer 10 two batches of 2 with another producer's batch between (two
	// runs: sequences 0..1 at 300, 2..3 at 310).
	setup := func() *State {
		s := New()
		for i := int32(0); i < 3; i++ {
			s.Update(info(7, 2, i*10, 10, 100+batch.Offset(i)*10))
		}
		s.Update(info(8, 0, math.MaxInt32-4, 5, 200))
		s.Update(info(10, 0, 0, 2, 300))
		s.Update(info(10, 0, 2, 2, 310))
		return s
	}
	nonIdem := BatchInfo{ProducerID: -1, ProducerEpoch: -1, FirstSeq: -1, LastSeq: -1}
	for _, c := range []struct {
		name    string
		bs      []BatchInfo
		want    Verdict
		wantErr error
	}{
		{"next in sequence", []BatchInfo{info(7, 2, 30, 5, 130)}, Verdict{}, nil},
		{"not idempotent", []BatchInfo{nonIdem}, Verdict{}, nil},
		{"not idempotent with an epoch", []BatchInfo{{ProducerID: -1, ProducerEpoch: 0, FirstSeq: -1}}, Verdict{}, ErrInvalidRecord},
		{"not idempotent with a sequence", []BatchInfo{{ProducerID: -1, ProducerEpoch: -1, FirstSeq: 0}}, Verdict{}, ErrInvalidRecord},
		{"negative epoch", []BatchInfo{info(7, -1, 30, 1, 130)}, Verdict{}, ErrInvalidRecord},
		{"negative sequence", []BatchInfo{{ProducerID: 7, ProducerEpoch: 2, FirstSeq: -1, LastSeq: -1}}, Verdict{}, ErrInvalidRecord},
		{"duplicate of the last", []BatchInfo{info(7, 2, 20, 10, 130)}, Verdict{Duplicate: true, FirstOffset: 120, LastOffset: 129}, nil},
		{"duplicate of the first", []BatchInfo{info(7, 2, 0, 10, 130)}, Verdict{Duplicate: true, FirstOffset: 100, LastOffset: 109}, nil},
		{"duplicate among several", []BatchInfo{nonIdem, info(7, 2, 10, 10, 131)}, Verdict{}, ErrDuplicateSequence},
		{"inside a run", []BatchInfo{info(7, 2, 20, 5, 130)}, Verdict{Duplicate: true, FirstOffset: 120, LastOffset: 124}, nil},
		{"across two batches of a run", []BatchInfo{info(7, 2, 5, 10, 130)}, Verdict{Duplicate: true, FirstOffset: 105, LastOffset: 114}, nil},
		{"the second run", []BatchInfo{info(10, 0, 2, 2, 320)}, Verdict{Duplicate: true, FirstOffset: 310, LastOffset: 311}, nil},
		{"across two runs", []BatchInfo{info(10, 0, 1, 2, 320)}, Verdict{}, ErrOutOfOrderSequence},
		{"after two runs", []BatchInfo{info(10, 0, 4, 2, 320)}, Verdict{}, nil},
		{"gap", []BatchInfo{info(7, 2, 31, 1, 130)}, Verdict{}, ErrOutOfOrderSequence},
		{"overlapping the end in part", []BatchInfo{info(7, 2, 25, 10, 130)}, Verdict{}, ErrOutOfOrderSequence},
		{"older epoch", []BatchInfo{info(7, 1, 30, 1, 130)}, Verdict{}, ErrInvalidProducerEpoch},
		{"older epoch, duplicate sequences", []BatchInfo{info(7, 1, 20, 10, 130)}, Verdict{}, ErrInvalidProducerEpoch},
		{"newer epoch from 0", []BatchInfo{info(7, 3, 0, 4, 130)}, Verdict{}, nil},
		{"newer epoch not from 0", []BatchInfo{info(7, 3, 30, 4, 130)}, Verdict{}, ErrOutOfOrderSequence},
		{"unknown producer from 0", []BatchInfo{info(9, 0, 0, 4, 130)}, Verdict{}, nil},
		{"unknown producer, any epoch, from 0", []BatchInfo{info(9, 12, 0, 4, 130)}, Verdict{}, nil},
		{"unknown producer not from 0", []BatchInfo{info(9, 0, 4, 4, 130)}, Verdict{}, ErrUnknownProducerID},
		{"sequence wraps", []BatchInfo{info(8, 0, 0, 3, 205)}, Verdict{}, nil},
		{"sequence wraps, gap", []BatchInfo{info(8, 0, 1, 3, 205)}, Verdict{}, ErrOutOfOrderSequence},
		{"two in one append", []BatchInfo{info(7, 2, 30, 5, 130), info(7, 2, 35, 5, 135)}, Verdict{}, nil},
		{"two in one append, gap in the second", []BatchInfo{info(7, 2, 30, 5, 130), info(7, 2, 36, 5, 135)}, Verdict{}, ErrOutOfOrderSequence},
		{"the same batch twice in one append", []BatchInfo{info(7, 2, 30, 5, 130), info(7, 2, 30, 5, 135)}, Verdict{}, ErrOutOfOrderSequence},
		{"new producer, then its next", []BatchInfo{info(9, 0, 0, 2, 130), info(9, 0, 2, 2, 132)}, Verdict{}, nil},
		{"epoch bump, then an old-epoch batch", []BatchInfo{info(7, 3, 0, 2, 130), info(7, 2, 30, 2, 132)}, Verdict{}, ErrInvalidProducerEpoch},
		{"a refusal after a good batch", []BatchInfo{info(9, 0, 0, 2, 130), info(7, 2, 31, 1, 132)}, Verdict{}, ErrOutOfOrderSequence},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := setup()
			before := s.Entries()
			got, err := s.Check(c.bs)
			if !errors.Is(err, c.wantErr) || (err == nil) != (c.wantErr == nil) {
				t.Fatalf("Check = %+v, %v; want error %v", got, err, c.wantErr)
			}
			if got != c.want {
				t.Fatalf("Check = %+v, want %+v", got, c.want)
			}
			if after := s.Entries(); !equalEntries(before, after) {
				t.Fatalf("Check changed the state:\n%+v\n%+v", before, after)
			}
		})
	}
}

func equalEntries(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ProducerID != b[i].ProducerID || a[i].Epoch != b[i].Epoch || a[i].LastTimestamp != b[i].LastTimestamp || len(a[i].Runs) != len(b[i].Runs) {
			return false
		}
		for j := range a[i].Runs {
			if a[i].Runs[j] != b[i].Runs[j] {
				return false
			}
		}
	}
	return true
}

func TestUpdateWindow(t *testing.T) {
	s := New()
	// Another producer's batch between each two: every batch is a run of its own.
	for i := int32(0); i < Window+3; i++ {
		s.Update(info(1, 0, i, 1, batch.Offset(2*i)))
	}
	e, ok := s.Lookup(1)
	if !ok || len(e.Runs) != Window || e.Runs[0].FirstSeq != 3 || e.Runs[Window-1].FirstSeq != Window+2 {
		t.Fatalf("after %d batches the window is %+v, want sequences 3..%d", Window+3, e, Window+2)
	}
	if v, err := s.Check([]BatchInfo{info(1, 0, 3, 1, 100)}); err != nil || !v.Duplicate || v.FirstOffset != 6 {
		t.Fatalf("a retry of the window's oldest: %+v, %v; want a duplicate at 6", v, err)
	}
	// Older than the window: the producer cannot have it in flight with ≤ Window batches
	// out, so it is out of order rather than a duplicate.
	if _, err := s.Check([]BatchInfo{info(1, 0, 2, 1, 100)}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("a retry older than the window: %v, want out of order", err)
	}
	// Batches that follow each other in sequence and offset extend the last run: an append
	// of many batches is one run, and all of them are remembered.
	next := batch.Offset(2*(Window+3) + 5)
	for i := int32(Window + 3); i < 100; i++ {
		s.Update(info(1, 0, i, 1, next))
		next++
	}
	if e, _ := s.Lookup(1); len(e.Runs) != Window || e.Runs[Window-1].FirstSeq != Window+3 || e.Runs[Window-1].LastSeq != 99 {
		t.Fatalf("after a run of batches: %+v, want the last run %d..99", e, Window+3)
	}
	if v, err := s.Check([]BatchInfo{info(1, 0, Window+4, 1, next)}); err != nil || !v.Duplicate || v.FirstOffset != 2*(Window+3)+6 {
		t.Fatalf("a retry of the run's second batch: %+v, %v", v, err)
	}
	s.Update(info(1, 1, 0, 1, next))
	if e, _ := s.Lookup(1); e.Epoch != 1 || len(e.Runs) != 1 {
		t.Fatalf("after an epoch bump: %+v, want epoch 1 and one batch", e)
	}
	s.Update(BatchInfo{ProducerID: -1, ProducerEpoch: -1, FirstSeq: -1})
	if s.Len() != 1 {
		t.Fatalf("a batch without a producer id made an entry: %d producers", s.Len())
	}
}

func TestExpire(t *testing.T) {
	s := New()
	for id := int64(0); id < 4; id++ {
		b := info(id, 0, 0, 1, batch.Offset(id))
		b.MaxTimestamp = 1000 * id
		s.Update(b)
	}
	if n := s.Expire(3500, 2*time.Second); n != 2 {
		t.Fatalf("Expire dropped %d, want 2 (timestamps 0 and 1000 are ≥ 2s before 3500)", n)
	}
	if _, ok := s.Lookup(1); ok {
		t.Fatal("producer 1 survived expiry")
	}
	if _, ok := s.Lookup(2); !ok {
		t.Fatal("producer 2 (1.5 s idle) expired")
	}
	b := info(9, 0, 0, 1, 9)
	b.MaxTimestamp = math.MinInt64
	s.Update(b)
	if n := s.Expire(math.MaxInt64/2, time.Hour); n != 3 {
		t.Fatalf("Expire at a far time dropped %d, want 3", n)
	}
}

func TestClone(t *testing.T) {
	s := New()
	s.Update(info(1, 0, 0, 1, 0))
	c := s.Clone()
	s.Update(info(1, 0, 1, 1, 1))
	s.Update(info(2, 0, 0, 1, 2))
	if e, _ := c.Lookup(1); c.Len() != 1 || len(e.Runs) != 1 {
		t.Fatalf("the clone follows the original: %+v", c.Entries())
	}
}

func TestInfoOf(t *testing.T) {
	bld := batch.NewBuilder(batch.BuilderOptions{})
	bld.SetProducerState(42, 3, math.MaxInt32-1)
	for i := 0; i < 4; i++ {
		bld.Append(&batch.Record{Timestamp: int64(100 + i), Value: []byte("v")})
	}
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	b.SetBaseOffset(50)
	got := InfoOf(b)
	want := BatchInfo{ProducerID: 42, ProducerEpoch: 3, FirstSeq: math.MaxInt32 - 1, LastSeq: 1, FirstOffset: 50, LastOffset: 53, MaxTimestamp: 103}
	if got != want {
		t.Fatalf("InfoOf = %+v, want %+v", got, want)
	}
}
