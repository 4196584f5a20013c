package brokertest

import (
	"fmt"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/segment"
)

// LogBatches reads every whole batch of l from its start up to upTo (a batch boundary: a high
// watermark or the log end), each checked (batch.Validate: header and CRC), for tests that
// compare replicas' logs batch by batch. It fails if the log holds less than upTo.
func LogBatches(l *segment.Log, upTo batch.Offset) ([]batch.Batch, error) {
	var out []batch.Batch
	for off := l.StartOffset(); off < upTo; {
		s, err := l.Read(off, 1<<20, upTo)
		if err != nil {
			return out, fmt.Errorf("read at %d: %w", off, err)
		}
		buf, err := s.AppendTo(nil)
		s.Release()
		if err != nil {
			return out, fmt.Errorf("read at %d: %w", off, err)
		}
		next := off
		for rest := buf; len(rest) > 0; {
			b, r, err := batch.Next(rest)
			if err != nil {
				break // a partial batch at the end of the read: read again from it
			}
			if err := b.Validate(); err != nil {
				return out, fmt.Errorf("batch at %d: %w", b.BaseOffset(), err)
			}
			out = append(out, b)
			next = b.NextOffset()
			rest = r
		}
		if next == off {
			return out, fmt.Errorf("no whole batch at %d below %d (log end %d)", off, upTo, l.EndOffset())
		}
		off = next
	}
	return out, nil
}

// BatchValues is the record values of bs by offset.
func BatchValues(bs []batch.Batch) (map[batch.Offset]string, error) {
	out := map[batch.Offset]string{}
	for _, b := range bs {
		it := b.Iter(batch.IterOptions{})
		var r batch.Record
		for it.Next(&r) {
			out[r.Offset] = string(r.Value)
		}
		if err := it.Err(); err != nil {
			return out, fmt.Errorf("batch at %d: %w", b.BaseOffset(), err)
		}
	}
	return out, nil
}
