package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/client"
)

// Workers are the running writers, readers and group consumers. Stop ends them (the writers
// first, waiting for every send in flight to have its outcome recorded) and waits for their
// goroutines.
//
// Ownership: StartWorkers starts one goroutine per writer, two per reader and one per group
// consumer slot; Stop stops and waits for all of them and closes every producer and consumer.
// stopOnce makes Stop run once.
type Workers struct {
	writers []*writer
	readers []*reader
	group   *groupWorkers // nil without group consumers
	stats   *workerCounters

	stopWriters chan struct{}
	writersWG   sync.WaitGroup
	cancelReads context.CancelFunc
	readersWG   sync.WaitGroup

	stopOnce sync.Once
	stopErr  error
}

// WorkerStats are the workers' counts so far, for progress lines.
type WorkerStats struct {
	Sent, Acknowledged, Failed int64
	Read                       int64
	// Passes counts the readers' passes from the log start that read to their end.
	Passes  int64
	LastAck time.Time
	// GroupDelivered counts the records group consumers delivered (redeliveries included),
	// GroupCommits their CommitSync calls, GroupCrashes the crashes the harness caused.
	GroupDelivered, GroupCommits, GroupCrashes int64
}

// workerCounters are the counts the workers' goroutines add to.
type workerCounters struct {
	sent, ok, failed, read, passes atomic.Int64
	groupDelivered, groupCommits   atomic.Int64
	groupCrashes                   atomic.Int64
	lastAck                        atomic.Int64 // UnixNano of the latest acknowledgement, 0 before
}

func (c *workerCounters) acked(t time.Time) {
	c.ok.Add(1)
	c.lastAck.Store(t.UnixNano())
}

// StartWorkers starts w's writers, readers and group consumers against the cluster at
// bootstrap, recording every send, read, and group consumer's delivery and commit to rec. w
// must have its defaults (WithDefaults), and its topics exist (CreateTopics). Writer, reader
// and group consumer ids count from 1. ctx bounds only the start (the producers' and
// consumers' first metadata); the workers run until Stop.
func StartWorkers(ctx context.Context, bootstrap []string, w Workload, rec *Recorder) (*Workers, error) {
	if w.Writers < 1 || w.Readers < 1 || w.Rate < 1 || w.Topics < 1 || w.Partitions < 1 {
		return nil, fmt.Errorf("%w: StartWorkers needs a workload with its defaults (WithDefaults)", ErrWorkload)
	}
	ws := &Workers{stats: &workerCounters{}, stopWriters: make(chan struct{})}
	fail := func(err error) (*Workers, error) {
		ws.closeAll(context.Background())
		return nil, err
	}
	for id := 1; id <= w.Writers; id++ {
		wr, err := newWriter(ctx, id, bootstrap, w, rec, ws.stats)
		if err != nil {
			return fail(err)
		}
		ws.writers = append(ws.writers, wr)
	}
	for id := 1; id <= w.Readers; id++ {
		rd := &reader{id: id, w: w, tps: w.partitions(), rec: rec, stats: ws.stats}
		ws.readers = append(ws.readers, rd)
		var err error
		if rd.tail, err = newReaderConsumer(ctx, bootstrap, id, "reader", w.Logger); err != nil {
			return fail(err)
		}
		if rd.pass, err = newReaderConsumer(ctx, bootstrap, id, "pass", w.Logger); err != nil {
			return fail(err)
		}
	}
	var err error
	if ws.group, err = startGroup(ctx, bootstrap, w, rec, ws.stats); err != nil {
		return fail(err)
	}
	readCtx, cancel := context.WithCancel(context.Background())
	ws.cancelReads = cancel
	for _, rd := range ws.readers {
		ws.readersWG.Add(2)
		go func() { defer ws.readersWG.Done(); rd.runTail(readCtx) }()
		go func() { defer ws.readersWG.Done(); rd.runPasses(readCtx, time.Duration(w.RereadInterval)) }()
	}
	for _, wr := range ws.writers {
		ws.writersWG.Add(1)
		go func() { defer ws.writersWG.Done(); wr.run(ws.stopWriters) }()
	}
	return ws, nil
}

// Stats are the counts so far.
func (ws *Workers) Stats() WorkerStats {
	s := WorkerStats{
		Sent: ws.stats.sent.Load(), Acknowledged: ws.stats.ok.Load(), Failed: ws.stats.failed.Load(),
		Read: ws.stats.read.Load(), Passes: ws.stats.passes.Load(),
		GroupDelivered: ws.stats.groupDelivered.Load(), GroupCommits: ws.stats.groupCommits.Load(),
		GroupCrashes: ws.stats.groupCrashes.Load(),
	}
	if t := ws.stats.lastAck.Load(); t != 0 {
		s.LastAck = time.Unix(0, t)
	}
	return s
}

// Stop stops the workers: writers first (each send in flight gets its outcome), then the group
// consumers (once they have committed what the writers wrote, or groupDrainTimeout), then
// readers. ctx bounds the wait for the outcomes: the sends still pending when it ends fail
// with the producer's close, and are recorded so. Stop is idempotent.
func (ws *Workers) Stop(ctx context.Context) error {
	ws.stopOnce.Do(func() {
		close(ws.stopWriters)
		ws.writersWG.Wait()
		ws.stopErr = ws.closeAll(ctx)
	})
	return ws.stopErr
}

// closeAll drains and closes the writers (in parallel: each waits for its own outcomes), then
// stops the group consumers, then the readers' loops, and closes their consumers. The
// writers' loops have returned, or never started.
func (ws *Workers) closeAll(ctx context.Context) error {
	errs := make([]error, len(ws.writers))
	var wg sync.WaitGroup
	for i, wr := range ws.writers {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = wr.drain(ctx) }()
	}
	wg.Wait()
	if ws.group != nil {
		if err := ws.group.stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if ws.cancelReads != nil {
		ws.cancelReads()
	}
	ws.readersWG.Wait()
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, rd := range ws.readers {
		for _, c := range [...]*client.Consumer{rd.tail, rd.pass} {
			if c == nil {
				continue
			}
			if err := c.Close(closeCtx); err != nil {
				errs = append(errs, fmt.Errorf("chaos: reader %d: %w", rd.id, err))
			}
		}
	}
	return errors.Join(errs...)
}
