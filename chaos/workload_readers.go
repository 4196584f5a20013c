package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/client"
)

// The readers. Each reader has two consumers by assignment, with auto.offset.reset=none so
// that a position outside the log is an error to record, never a silent jump:
//
//   - the tail, assigned every partition from its log start, records every poll's records of
//     each partition as one EvRead (Pass 0), for the whole run;
//   - the passes: every RereadInterval, a read of every partition from its log start to the
//     high watermark listed when the pass began (Pass 1, 2, ...).
//
// An error (an offset out of range, a corrupt batch, a partition the consumer cannot fetch) is
// recorded as an EvInfo; the reader waits readerBackoff and seeks every partition back to
// where it had got to, and goes on. Readers stop only when the workers stop.

const (
	// readerRequestTimeout is the readers' request.timeout.ms: short, as the writers'.
	readerRequestTimeout = 5 * time.Second
	// readerBackoff is the wait after an error before a reader seeks back and polls again.
	readerBackoff = 500 * time.Millisecond
)

// newReaderConsumer makes a consumer for reader id (FinalReader for the final read).
func newReaderConsumer(ctx context.Context, bootstrap []string, id int, role string, logger *slog.Logger) (*client.Consumer, error) {
	fileReads := false // through the network, and so through the fault proxy
	c, err := client.NewConsumer(ctx, client.ConsumerConfig{
		Config: client.Config{
			Brokers:        bootstrap,
			ClientID:       "sluice-chaos-" + role + "-" + strconv.Itoa(id),
			RequestTimeout: readerRequestTimeout,
			Logger:         logger,
		},
		AutoOffsetReset: client.OffsetResetNone,
		FileReads:       &fileReads,
	})
	if err != nil {
		return nil, fmt.Errorf("chaos: %s %d: %w", role, id, err)
	}
	return c, nil
}

// reader is one reader's two loops.
type reader struct {
	id    int
	w     Workload
	tps   []client.TopicPartition
	rec   *Recorder
	stats *workerCounters
	tail  *client.Consumer
	pass  *client.Consumer
}

// recordRecords records recs (one poll's) as one EvRead per partition, in offset order, and
// returns how many it recorded. keep, if not nil, says which records belong to the read.
func recordRecords(rec *Recorder, readerID, pass int, recs []client.Record, keep func(*client.Record) bool) int {
	return recordPoll(rec, Event{Type: EvRead, Reader: readerID, Pass: pass}, recs, keep)
}

// recordPoll records recs as one event per partition, each a copy of like (its type and who
// read the records: an EvRead's reader and pass, an EvDeliver's group, consumer and
// generation) with the partition and the offsets and values of its records that keep keeps
// (nil: all).
func recordPoll(rec *Recorder, like Event, recs []client.Record, keep func(*client.Record) bool) int {
	type group struct {
		offsets []int64
		values  []string
	}
	groups := map[client.TopicPartition]*group{}
	var order []client.TopicPartition
	n := 0
	for i := range recs {
		r := &recs[i]
		if keep != nil && !keep(r) {
			continue
		}
		tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		g := groups[tp]
		if g == nil {
			g = &group{}
			groups[tp] = g
			order = append(order, tp)
		}
		g.offsets = append(g.offsets, r.Offset)
		g.values = append(g.values, valueString(r.Value))
		n++
	}
	t := rec.Now()
	for _, tp := range order {
		g := groups[tp]
		e := like
		e.T, e.Topic, e.Partition, e.Offsets, e.Values = t, tp.Topic, tp.Partition, g.offsets, g.values
		rec.Record(e)
	}
	return n
}

// valueString is a record value as the history holds it: Value.String, or the raw value
// quoted if it does not parse.
func valueString(b []byte) string {
	if v, ok := ParseValue(b); ok {
		return v.String()
	}
	return strconv.Quote(string(b))
}

// recordInfo records an error of a reader as an EvInfo.
func recordInfo(rec *Recorder, readerID int, what string, err error) {
	rec.Record(Event{Type: EvInfo, Reader: readerID, Detail: what, Err: err.Error()})
}

// sleepCtx waits d, or until ctx ends (reporting false): run.go's waitUntil as a bool.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	return waitUntil(ctx, time.Now().Add(d)) == nil && ctx.Err() == nil
}

// seekBack puts every partition of tps at its position in pos, or at its log start where
// the reader has none yet: after an error, so that the next poll goes on where it was.
func seekBack(c *client.Consumer, tps []client.TopicPartition, pos map[client.TopicPartition]int64) error {
	var fromStart []client.TopicPartition
	for _, tp := range tps {
		if p, ok := pos[tp]; ok {
			if err := c.Seek(tp, p); err != nil {
				return err
			}
		} else {
			fromStart = append(fromStart, tp)
		}
	}
	if len(fromStart) > 0 {
		return c.SeekToBeginning(fromStart)
	}
	return nil
}

// runTail reads every partition from its log start until ctx ends.
func (rd *reader) runTail(ctx context.Context) {
	c := rd.tail
	what := fmt.Sprintf("reader %d tail", rd.id)
	pos := map[client.TopicPartition]int64{}
	// Assign and seek cannot fail here but for a closed consumer (the topics' names are
	// the workload's): then the loop below ends at once with ctx.
	if err := c.Assign(rd.tps); err != nil {
		recordInfo(rd.rec, rd.id, what, err)
	} else if err := c.SeekToBeginning(nil); err != nil {
		recordInfo(rd.rec, rd.id, what, err)
	}
	for ctx.Err() == nil {
		recs, err := c.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, client.ErrConsumerClosed) {
				return
			}
			recordInfo(rd.rec, rd.id, what, err)
			if !sleepCtx(ctx, readerBackoff) {
				return
			}
			if err := seekBack(c, rd.tps, pos); err != nil {
				recordInfo(rd.rec, rd.id, what+": seeking back", err)
			}
			continue
		}
		for i := range recs {
			pos[client.TopicPartition{Topic: recs[i].Topic, Partition: recs[i].Partition}] = recs[i].Offset + 1
		}
		rd.stats.read.Add(int64(recordRecords(rd.rec, rd.id, 0, recs, nil)))
	}
}

// runPasses makes a pass every interval until ctx ends.
func (rd *reader) runPasses(ctx context.Context, interval time.Duration) {
	for pass := 1; sleepCtx(ctx, interval); pass++ {
		what := fmt.Sprintf("reader %d pass %d", rd.id, pass)
		spans := listSpans(ctx, rd.pass, rd.tps, rd.rec, rd.id, what)
		if ctx.Err() != nil {
			return
		}
		n, _ := readSpans(ctx, rd.pass, spans, rd.rec, rd.id, pass, what)
		rd.stats.read.Add(n)
		if ctx.Err() == nil {
			rd.stats.passes.Add(1)
		}
	}
}

// span is a range of offsets [start, end) to read from a partition.
type span struct{ start, end int64 }

// listSpans lists every partition's log start and high watermark from its leader, retrying
// the partitions that could not be listed (each failure recorded) until all are or ctx ends.
func listSpans(ctx context.Context, c *client.Consumer, tps []client.TopicPartition, rec *Recorder, readerID int, what string) map[client.TopicPartition]span {
	out := make(map[client.TopicPartition]span, len(tps))
	for failures := 0; ctx.Err() == nil; failures++ {
		var left []client.TopicPartition
		for _, tp := range tps {
			if _, ok := out[tp]; !ok {
				left = append(left, tp)
			}
		}
		if len(left) == 0 {
			break
		}
		starts, err1 := listOffsets(ctx, c, left, client.OffsetEarliest)
		ends, err2 := listOffsets(ctx, c, left, client.OffsetLatest)
		for _, tp := range left {
			s, ok1 := starts[tp]
			e, ok2 := ends[tp]
			if ok1 && ok2 {
				out[tp] = span{s, max(s, e)}
			}
		}
		if err := errors.Join(err1, err2); err != nil && ctx.Err() == nil {
			recordInfo(rec, readerID, what+": listing offsets", err)
			if !sleepCtx(ctx, readerBackoff) {
				break
			}
		}
	}
	return out
}

// listOffsets lists one offset per partition of tps.
func listOffsets(ctx context.Context, c *client.Consumer, tps []client.TopicPartition, spec client.OffsetSpec) (map[client.TopicPartition]int64, error) {
	specs := make(map[client.TopicPartition]client.OffsetSpec, len(tps))
	for _, tp := range tps {
		specs[tp] = spec
	}
	got, err := c.ListOffsets(ctx, specs)
	out := make(map[client.TopicPartition]int64, len(got))
	for tp, lo := range got {
		out[tp] = lo.Offset
	}
	return out, err
}

// readSpans reads every span with c, recording each poll's records (those inside the spans)
// as EvRead events of readerID and pass, until every span is read or ctx ends. Errors are
// recorded; the read then seeks back to where it got to and goes on. It returns how many
// records it recorded and, per partition, the offset it got to.
func readSpans(ctx context.Context, c *client.Consumer, spans map[client.TopicPartition]span, rec *Recorder, readerID, pass int, what string) (int64, map[client.TopicPartition]int64) {
	pos := make(map[client.TopicPartition]int64, len(spans))
	var left []client.TopicPartition
	for tp, s := range spans {
		pos[tp] = s.start
		if s.start < s.end {
			left = append(left, tp)
		}
	}
	sort.Slice(left, func(i, j int) bool {
		if left[i].Topic != left[j].Topic {
			return left[i].Topic < left[j].Topic
		}
		return left[i].Partition < left[j].Partition
	})
	var n int64
	reassign, seek := true, true
	for len(left) > 0 && ctx.Err() == nil {
		// Assign keeps the positions of partitions that stay; the seeks (at the start, and
		// after an error) put every one at the offset the read got to.
		if reassign {
			if err := c.Assign(left); err != nil {
				recordInfo(rec, readerID, what, err)
				return n, pos
			}
			reassign = false
		}
		if seek {
			if err := seekBack(c, left, pos); err != nil {
				recordInfo(rec, readerID, what, err)
				return n, pos
			}
			seek = false
		}
		recs, err := c.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, client.ErrConsumerClosed) {
				break
			}
			recordInfo(rec, readerID, what, err)
			if !sleepCtx(ctx, readerBackoff) {
				break
			}
			seek = true
			continue
		}
		n += int64(recordRecords(rec, readerID, pass, recs, func(r *client.Record) bool {
			tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			s, ok := spans[tp]
			if !ok || r.Offset < pos[tp] || r.Offset >= s.end {
				return false
			}
			pos[tp] = r.Offset + 1
			return true
		}))
		kept := left[:0]
		for _, tp := range left {
			if pos[tp] < spans[tp].end {
				kept = append(kept, tp)
			} else {
				reassign = true // done: fetch it no more
			}
		}
		left = kept
	}
	return n, pos
}
