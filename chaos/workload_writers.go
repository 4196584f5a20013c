package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicemq/sluice/client"
)

// The writers. Each is one Producer (acks=all, retries on, the workload's idempotence, MaxInFlight and
// DeliveryTimeout) sending Value{id, seq} for seq = 1, 2, ... to the workload's partitions in
// turn, so that every partition gets every writer's values. A ticker paces each writer at
// Rate/Writers records a second (ticks missed while the writer waits are dropped, not made
// up), and at most maxPending sends of a writer wait for their outcome: a stalled cluster
// stops the writer instead of piling records up in memory. Every send is recorded once, as an
// EvSend, when its outcome is known.

const (
	// writerLinger is the writers' linger.ms: short, so that a send's latency is the
	// cluster's, and so that at a few hundred records a second batches still form.
	writerLinger = 5 * time.Millisecond
	// writerRequestTimeout is the writers' request.timeout.ms: short, so that a broker that
	// stopped answering (paused, partitioned away) is given up on and the leader looked up
	// again well within the delivery timeout.
	writerRequestTimeout = 5 * time.Second
	// maxPending bounds a writer's sends waiting for their outcome.
	maxPending = 1000
)

// writer is one writer's loop. Its producer is owned by run, which closes it.
type writer struct {
	id    int
	w     Workload
	tps   []client.TopicPartition
	p     *client.Producer
	rec   *Recorder
	stats *workerCounters
	value []byte // the padded value, rebuilt per send (Send copies it)

	pending sync.WaitGroup // sends without an outcome yet
	slots   chan struct{}  // a token per pending send, at most maxPending
}

func newWriter(ctx context.Context, id int, bootstrap []string, w Workload, rec *Recorder, stats *workerCounters) (*writer, error) {
	idempotent := w.Idempotent() // explicit: the checker holds the run to what the workload says
	p, err := client.NewProducer(ctx, client.ProducerConfig{
		Config: client.Config{
			Brokers:        bootstrap,
			ClientID:       fmt.Sprintf("sluice-chaos-writer-%d", id),
			RequestTimeout: writerRequestTimeout,
			Logger:         w.Logger,
		},
		Acks:              client.AcksAll,
		Linger:            writerLinger,
		MaxInFlight:       w.MaxInFlight,
		EnableIdempotence: &idempotent,
		DeliveryTimeout:   time.Duration(w.DeliveryTimeout),
		// A writer waiting out a cluster without leaders must not block in Send past its own
		// delivery timeout: the record then fails and is recorded so.
		MaxBlock: time.Duration(w.DeliveryTimeout),
	})
	if err != nil {
		return nil, fmt.Errorf("chaos: writer %d: %w", id, err)
	}
	return &writer{id: id, w: w, tps: w.partitions(), p: p, rec: rec, stats: stats, slots: make(chan struct{}, maxPending)}, nil
}

// run sends until stop is closed. The sends still pending then are drain's.
func (wr *writer) run(stop <-chan struct{}) {
	interval := time.Duration(float64(time.Second) * float64(wr.w.Writers) / float64(wr.w.Rate))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// Sends use a context that lives as long as the producer: a Send blocked on metadata or
	// memory ends at max.block.ms with its record failed (and recorded so), never abandoned
	// without an outcome.
	ctx := context.Background()
	// The writers start at different partitions, so that their first sends spread.
	next := wr.id
	var seq int64
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		select {
		case wr.slots <- struct{}{}:
		case <-stop:
			return
		}
		seq++
		wr.send(ctx, wr.tps[next%len(wr.tps)], seq)
		next++
	}
}

// drain waits for every pending send's outcome, or ctx, and closes the producer: a send still
// pending when ctx ends fails with the producer's close (ErrProducerClosed), so that every
// send is recorded with an outcome either way.
func (wr *writer) drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { wr.pending.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	err := wr.p.Close(ctx)
	<-done // Close has run every callback
	if err != nil {
		return fmt.Errorf("chaos: writer %d: %w", wr.id, err)
	}
	return nil
}

// send sends one value to tp and records its outcome when it comes.
func (wr *writer) send(ctx context.Context, tp client.TopicPartition, seq int64) {
	v := Value{Writer: wr.id, Seq: seq}
	wr.value = append(wr.value[:0], v.String()...)
	for len(wr.value) < wr.w.RecordSize {
		wr.value = append(wr.value, ' ')
	}
	r := client.Record{Topic: tp.Topic, Value: wr.value}.OnPartition(tp.Partition)
	start := wr.rec.Now()
	wr.pending.Add(1)
	wr.stats.sent.Add(1)
	wr.p.Send(ctx, &r, func(md client.RecordMetadata, err error) {
		defer wr.pending.Done()
		defer func() { <-wr.slots }()
		e := Event{Type: EvSend, Topic: tp.Topic, Partition: tp.Partition, Writer: wr.id, Seq: seq, Start: start}
		if err != nil {
			e.Outcome, e.Offset, e.Err = Failed, -1, err.Error()
			wr.stats.failed.Add(1)
		} else {
			e.Outcome, e.Offset = OK, md.Offset
			wr.stats.acked(time.Now())
		}
		wr.rec.Record(e)
	})
}
