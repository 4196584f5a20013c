package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/client"
)

// The end of a run: FinalRead reads every partition fully from its leader, and
// CompareReplicas (verify_replicas.go) compares every replica's files with the leader's.

// ReplicaState is each partition's leader, replicas and ISR as the metadata gave them at the
// end of the final read: what CompareReplicas compares against.
type ReplicaState struct {
	Leaders  map[TopicPartition]int32
	Replicas map[TopicPartition][]int32
	ISR      map[TopicPartition][]int32
}

// finalSettle is how often FinalRead lists the high watermarks again once it has read to
// them, until two listings agree (a request that outlived its send's delivery timeout may
// still be appended after the writers stopped).
const finalSettle = 200 * time.Millisecond

// FinalRead reads every partition of w from its leader, from the log start to the high
// watermark, recording the records as EvRead events of FinalReader, and returns the high
// watermarks and log starts it read between. It retries a partition (from where it got to)
// until timeout while the cluster settles.
func FinalRead(ctx context.Context, bootstrap []string, w Workload, rec *Recorder, timeout time.Duration) (FinalState, error) {
	fs, _, err := FinalReadReplicas(ctx, bootstrap, w, rec, timeout)
	return fs, err
}

// FinalReadReplicas is FinalRead that also returns the partitions' leaders and ISRs from the
// metadata after the read (for CompareReplicas). A partition not read to its high watermark
// by timeout is named in the error; the state returned then still holds every high
// watermark and log start that was listed, so that the checker counts the partition
// incomplete.
func FinalReadReplicas(ctx context.Context, bootstrap []string, w Workload, rec *Recorder, timeout time.Duration) (FinalState, ReplicaState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fs := FinalState{HighWatermarks: map[TopicPartition]int64{}, LogStarts: map[TopicPartition]int64{}}
	c, err := newReaderConsumerRetrying(ctx, bootstrap, rec, w.Logger)
	if err != nil {
		return fs, ReplicaState{}, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(closeCtx)
	}()
	tps := w.partitions()
	const what = "final read"
	spans := listSpans(ctx, c, tps, rec, FinalReader, what)
	reached := map[client.TopicPartition]int64{}
	for tp, s := range spans {
		fs.LogStarts[TopicPartition(tp)] = s.start
		reached[tp] = s.start
	}
	// Read to the high watermarks, list them again, and read on while any has moved.
	for ctx.Err() == nil {
		todo := map[client.TopicPartition]span{}
		for tp, s := range spans {
			if reached[tp] < s.end {
				todo[tp] = span{reached[tp], s.end}
			}
		}
		if len(todo) > 0 {
			_, pos := readSpans(ctx, c, todo, rec, FinalReader, 0, what)
			for tp, p := range pos {
				reached[tp] = p
			}
			continue
		}
		if len(spans) == len(tps) && !sleepCtx(ctx, finalSettle) {
			break
		}
		again := listSpans(ctx, c, tps, rec, FinalReader, what)
		moved := len(again) != len(spans)
		for tp, s := range again {
			if old, ok := spans[tp]; !ok || s.end != old.end {
				moved = true
			}
			if _, ok := spans[tp]; !ok {
				fs.LogStarts[TopicPartition(tp)] = s.start
				reached[tp] = s.start
			}
			if old, ok := spans[tp]; ok && s.end < old.end {
				// The high watermark went down: a leader without the records the old one
				// had (an unclean election). The final state is the new leader's; the
				// records read past it stay in the history for the checker.
				rec.Record(Event{Type: EvInfo, Topic: tp.Topic, Partition: tp.Partition, Reader: FinalReader,
					Detail: fmt.Sprintf("final read: the high watermark went down from %d to %d", old.end, s.end)})
			}
			spans[tp] = s
		}
		if !moved && len(spans) == len(tps) {
			break
		}
	}
	var incomplete []string
	for _, tp := range tps {
		s, ok := spans[tp]
		if ok {
			fs.HighWatermarks[TopicPartition(tp)] = s.end
		}
		if !ok || reached[tp] < s.end {
			incomplete = append(incomplete, fmt.Sprintf("%s (read to %d of %d)", tp, reached[tp], s.end))
		}
	}
	rs, rerr := readReplicaState(ctx, bootstrap, w)
	if len(incomplete) > 0 {
		err = fmt.Errorf("chaos: final read: %d partitions not read to their high watermark in %v: %s",
			len(incomplete), timeout, strings.Join(incomplete, ", "))
	}
	return fs, rs, errors.Join(err, rerr)
}

// newReaderConsumerRetrying makes the final read's consumer, retrying while no broker answers
// (the cluster may still be coming back) until ctx ends.
func newReaderConsumerRetrying(ctx context.Context, bootstrap []string, rec *Recorder, logger *slog.Logger) (*client.Consumer, error) {
	for {
		c, err := newReaderConsumer(ctx, bootstrap, 0, "final-reader", logger)
		if err == nil {
			return c, nil
		}
		recordInfo(rec, FinalReader, "final read: connecting", err)
		if !sleepCtx(ctx, readerBackoff) {
			return nil, fmt.Errorf("chaos: final read: %w", err)
		}
	}
}

// readReplicaState reads the leaders, replicas and ISRs of w's partitions from the metadata,
// retrying until every partition has a leader or ctx ends (then it returns what it has).
func readReplicaState(ctx context.Context, bootstrap []string, w Workload) (ReplicaState, error) {
	rs := ReplicaState{Leaders: map[TopicPartition]int32{}, Replicas: map[TopicPartition][]int32{}, ISR: map[TopicPartition][]int32{}}
	// The final read's deadline may have passed: the metadata gets a few seconds of its own.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var lastErr error
	for {
		if cl, err := client.NewClient(mctx, client.Config{Brokers: bootstrap, ClientID: "sluice-chaos-final-reader"}); err != nil {
			lastErr = err
		} else {
			lastErr = fillReplicaState(mctx, cl, w, &rs)
			_ = cl.Close()
			if lastErr == nil {
				return rs, nil
			}
		}
		if !sleepCtx(mctx, readerBackoff) {
			return rs, fmt.Errorf("chaos: final read: partition leaders: %w", lastErr)
		}
	}
}

func fillReplicaState(ctx context.Context, cl *client.Client, w Workload, rs *ReplicaState) error {
	var errs []error
	for _, name := range w.TopicNames() {
		tm, err := cl.Topic(ctx, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range tm.Partitions {
			tp := TopicPartition{Topic: name, Partition: p.Partition}
			rs.Leaders[tp] = p.Leader
			rs.Replicas[tp] = slices.Clone(p.Replicas)
			rs.ISR[tp] = slices.Clone(p.ISR)
			if p.Leader < 0 {
				errs = append(errs, fmt.Errorf("%s-%d has no leader", tp.Topic, tp.Partition))
			}
		}
	}
	return errors.Join(errs...)
}
