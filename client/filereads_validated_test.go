package client

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/batch"
)

// A piece's batches that the reading goroutine checked (chunk.validated) are not checked again
// by Poll; the first it did not check is, so a damaged batch is still reported in its place,
// after the records before it, wherever the split fell.
func TestDecodeChecksWhatTheReaderDidNot(t *testing.T) {
	build := func(base int64, values ...string) []byte {
		b := batch.NewBuilder(batch.DefaultBuilderOptions())
		for _, v := range values {
			b.Append(&batch.Record{Timestamp: 1000, Value: []byte(v)})
		}
		bt, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		bt = slices.Clone(bt)
		bt.SetBaseOffset(batch.Offset(base))
		return bt
	}
	good1, good2, bad := build(0, "a", "b"), build(2, "c"), build(3, "d")
	bad[len(bad)-1] ^= 1 // the last record byte: the CRC no longer matches
	records := slices.Concat(good1, good2, bad)

	if n := validatedPrefix(records); n != len(good1)+len(good2) {
		t.Fatalf("validatedPrefix = %d, want %d (the two sound batches)", n, len(good1)+len(good2))
	}
	if n := validatedPrefix(records[:len(good1)]); n != len(good1) {
		t.Fatalf("validatedPrefix of one sound batch = %d, want %d", n, len(good1))
	}
	for _, validated := range []int{0, len(good1), len(good1) + len(good2)} {
		c := &Consumer{}
		ch := &chunk{records: records, rest: records, validated: validated}
		out, done, err := c.decode(ch, nil, 100)
		var values []string
		for _, r := range out {
			values = append(values, string(r.Value))
		}
		if !slices.Equal(values, []string{"a", "b", "c"}) || !done || !errors.Is(err, batch.ErrCRC) {
			t.Fatalf("validated %d: records %q, done %v, err %v; want a, b, c, then the CRC mismatch", validated, values, done, err)
		}
	}
}
