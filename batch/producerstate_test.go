package batch

import (
	"bytes"
	"errors"
	"testing"
)

// SetProducerState on a built batch gives the bytes Build would have given with those
// producer fields from the start, for every codec and for batches past the size at which the
// builder checksums records as they are appended; it refuses, unchanged, what is not one whole
// batch.
func TestSetProducerStateMatchesBuild(t *testing.T) {
	recs := sampleRecords()
	big := bytes.Repeat([]byte("v"), 1<<10)
	for _, c := range allCodecs {
		for _, n := range []int{1, len(recs), 200} {
			build := func(id int64, epoch int16, seq int32) Batch {
				opts := DefaultBuilderOptions()
				opts.Compression = c
				opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = id, epoch, seq
				bl := NewBuilder(opts)
				for i := range n {
					r := recs[i%len(recs)]
					if n == 200 {
						r.Value = big // past crcRunningMin: the running checksum
					}
					bl.Append(&r)
				}
				b, err := bl.Build()
				if err != nil {
					t.Fatal(err)
				}
				return bytes.Clone(b)
			}
			got := build(7, 3, 100)
			if err := got.SetProducerState(9, 0, 0); err != nil {
				t.Fatal(err)
			}
			want := build(9, 0, 0)
			if !bytes.Equal(got, want) {
				t.Fatalf("%v, %d records: restamped batch differs from one built with the new state", c, n)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("%v, %d records: %v", c, n, err)
			}
			if got.ProducerID() != 9 || got.ProducerEpoch() != 0 || got.BaseSequence() != 0 {
				t.Fatalf("%v: fields %d/%d/%d", c, got.ProducerID(), got.ProducerEpoch(), got.BaseSequence())
			}
		}
	}
	for _, bad := range []Batch{nil, make(Batch, HeaderSize-1), goldenBatch()[:HeaderSize+1], append(goldenBatch(), 0)} {
		before := bytes.Clone(bad)
		err := bad.SetProducerState(1, 1, 1)
		if !errors.Is(err, ErrShort) && !errors.Is(err, ErrInvalidLength) {
			t.Errorf("%d bytes: err = %v, want ErrShort or ErrInvalidLength", len(bad), err)
		}
		if !bytes.Equal(bad, before) {
			t.Errorf("%d bytes: changed although refused", len(bad))
		}
	}
}

// FuzzSetProducerState: any bytes, never a panic; a batch that validated still validates.
func FuzzSetProducerState(f *testing.F) {
	for _, s := range seedBatches(f) {
		f.Add(s, int64(5), int16(2), int32(9))
	}
	f.Fuzz(func(t *testing.T, data []byte, id int64, epoch int16, seq int32) {
		b := Batch(data)
		valid := b.Validate() == nil
		if err := b.SetProducerState(id, epoch, seq); err != nil {
			return
		}
		if valid {
			if err := b.Validate(); err != nil {
				t.Fatalf("valid before, not after: %v", err)
			}
			if b.ProducerID() != id || b.ProducerEpoch() != epoch || b.BaseSequence() != seq {
				t.Fatal("fields not stamped")
			}
		}
	})
}
