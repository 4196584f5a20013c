package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/client"
)

// The group consumers. GroupConsumers consumers of one group (GroupID) subscribe to every
// workload topic with auto-commit off and commit after processing, as an application that
// wants at-least-once does: each Poll's records are recorded (one EvDeliver per partition,
// with the consumer and its generation), then CommitSync commits their positions (one
// EvCommit per partition, with its outcome). The rebalance listener records every partition
// given (EvAssign) and taken away (EvRevoke, "revoked" or "lost"); on revocation it commits
// first what the consumer delivered, as Kafka's documentation advises.
//
// The harness crashes each consumer now and then, once it has had partitions for a time its
// rng (from Workload.Seed and the consumer's slot) draws, exponentially around
// GroupCrashInterval, and starts a new one in its place (a new Consumer id) after a pause of up to groupRestartMax. A crash is recorded
// (EvConsumerCrash) and is one of:
//
//   - hard: the consumer's connections are cut (its Dial is the harness's) before it is
//     closed, so it cannot leave the group; the coordinator removes it once its session times
//     out (groupSessionTimeout), and only then do its partitions move;
//   - soft: it is closed without a commit; it leaves the group, and its partitions move at
//     once.
//
// Half the crashes come between processing a Poll's records and committing them, so that the
// next owner gets those records again: a redelivery, which the checker counts and allows.
//
// Stop ends the crashes, waits until the group has committed every partition up to the end it
// had once the writers stopped (or groupDrainTimeout), closes every consumer (each commits on
// revocation and leaves the group), and records the group's committed offsets, fetched from
// its coordinator, as EvCommitted events: the checker's "final committed offset".

// GroupID is the group of the group consumers.
const GroupID = "chaos-group"

const (
	// groupSessionTimeout is the consumers' session.timeout.ms: the brokers' least
	// (group.min.session.timeout.ms), so that a hard crash's partitions move within seconds.
	groupSessionTimeout = 6 * time.Second
	// groupHeartbeat is their heartbeat.interval.ms.
	groupHeartbeat = time.Second
	// groupMaxPollInterval is their max.poll.interval.ms, also the rebalance timeout: a
	// consumer stuck in a commit through an outage holds a rebalance up for at most this.
	groupMaxPollInterval = 30 * time.Second
	// groupCommitTimeout bounds one CommitSync; one that ends by it is recorded Failed (it
	// may have been applied).
	groupCommitTimeout = 10 * time.Second
	// groupRestartMax is the longest pause between a crash and the consumer's restart.
	groupRestartMax = 2 * time.Second
	// groupDrainTimeout bounds Stop's wait for the group to commit every partition's end.
	groupDrainTimeout = 60 * time.Second
	// maxPollFailures is how many Polls in a row may fail before the consumer is replaced.
	maxPollFailures = 10
)

// groupAssignors are the values GroupAssignor takes.
var groupAssignors = []string{"cooperative-sticky", "range", "roundrobin"}

// groupWorkers are the group consumers of a run.
//
// Ownership: startGroup starts one goroutine per slot; stop cancels them and waits for them,
// and each closes its own consumer. side is used only by stop.
type groupWorkers struct {
	w         Workload
	bootstrap []string
	rec       *Recorder
	stats     *workerCounters
	tps       []client.TopicPartition
	// side is a consumer of the group that never subscribes: it lists the partitions' ends
	// and fetches the group's committed offsets at the end.
	side   *client.Consumer
	nextID atomic.Int64 // the last Consumer id given
	churn  atomic.Bool  // crashes allowed (until stop)

	mu struct {
		sync.Mutex
		committed map[client.TopicPartition]int64 // the highest offset committed with OK
	}

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startGroup starts w's group consumers (none if w has none: nil, nil).
func startGroup(ctx context.Context, bootstrap []string, w Workload, rec *Recorder, stats *workerCounters) (*groupWorkers, error) {
	if w.Groups() == 0 {
		return nil, nil
	}
	g := &groupWorkers{w: w, bootstrap: bootstrap, rec: rec, stats: stats, tps: w.partitions()}
	g.mu.committed = map[client.TopicPartition]int64{}
	off, fileReads := false, false
	side, err := client.NewConsumer(ctx, client.ConsumerConfig{
		Config: client.Config{
			Brokers: bootstrap, ClientID: "sluice-chaos-group-side",
			RequestTimeout: readerRequestTimeout, Logger: w.Logger,
		},
		GroupID: GroupID, EnableAutoCommit: &off, FileReads: &fileReads,
	})
	if err != nil {
		return nil, fmt.Errorf("chaos: group consumers: %w", err)
	}
	g.side = side
	g.churn.Store(true)
	runCtx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	for slot := 1; slot <= w.Groups(); slot++ {
		rng := rand.New(rand.NewPCG(w.Seed, 0x9c0+uint64(slot)))
		g.wg.Add(1)
		go func() { defer g.wg.Done(); g.runSlot(runCtx, slot, rng) }()
	}
	return g, nil
}

// runSlot runs one consumer after another in slot until ctx ends.
func (g *groupWorkers) runSlot(ctx context.Context, slot int, rng *rand.Rand) {
	for ctx.Err() == nil {
		m, err := g.newMember(ctx, slot)
		if err != nil {
			if ctx.Err() == nil {
				recordInfo(g.rec, 0, fmt.Sprintf("group consumer slot %d: starting", slot), err)
			}
			sleepCtx(ctx, readerBackoff)
			continue
		}
		life := time.Duration(rng.ExpFloat64() * float64(g.w.GroupCrashInterval))
		if !m.consume(ctx, life, rng) {
			return
		}
		sleepCtx(ctx, time.Duration(rng.Int64N(int64(groupRestartMax))))
	}
}

// noteCommitted raises the highest committed offsets with offs (an OK commit).
func (g *groupWorkers) noteCommitted(offs map[client.TopicPartition]int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for tp, o := range offs {
		g.mu.committed[tp] = max(g.mu.committed[tp], o)
	}
}

// behind names the partitions whose highest committed offset is below ends'.
func (g *groupWorkers) behind(ends map[client.TopicPartition]int64) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, tp := range g.tps {
		if end, ok := ends[tp]; ok && g.mu.committed[tp] < end {
			out = append(out, fmt.Sprintf("%s at %d of %d", tp, g.mu.committed[tp], end))
		}
	}
	return out
}

// stop ends the crashes, lets the group commit every partition's end (listed now: the writers
// have stopped), stops and closes the consumers, and records the group's committed offsets.
// ctx and groupDrainTimeout bound the waits; what does not happen within them is recorded as
// an EvInfo (the checker then holds the group to what it did commit).
func (g *groupWorkers) stop(ctx context.Context) error {
	g.churn.Store(false)
	ctx, cancel := context.WithTimeout(ctx, groupDrainTimeout)
	defer cancel()
	const what = "group consumers: the end of the run"
	ends := map[client.TopicPartition]int64{}
	for ctx.Err() == nil && len(ends) < len(g.tps) {
		got, err := listOffsets(ctx, g.side, g.tps, client.OffsetLatest)
		for tp, o := range got {
			ends[tp] = o
		}
		if err != nil && ctx.Err() == nil {
			recordInfo(g.rec, 0, what+": listing the ends", err)
			sleepCtx(ctx, readerBackoff)
		}
	}
	for left := g.behind(ends); len(left) > 0; left = g.behind(ends) {
		if !sleepCtx(ctx, 100*time.Millisecond) {
			g.rec.Record(Event{Type: EvInfo, Group: GroupID, Detail: what + ": not every end committed: " + strings.Join(left, ", ")})
			break
		}
	}
	g.cancel()
	g.wg.Wait()
	var errs []error
	for ctx.Err() == nil {
		got, err := g.side.Committed(ctx, g.tps)
		if err == nil {
			t := g.rec.Now()
			for _, tp := range g.tps {
				if o, ok := got[tp]; ok {
					g.rec.Record(Event{T: t, Type: EvCommitted, Group: GroupID, Topic: tp.Topic, Partition: tp.Partition, Offset: o})
				}
			}
			break
		}
		recordInfo(g.rec, 0, what+": fetching the committed offsets", err)
		if !sleepCtx(ctx, readerBackoff) {
			errs = append(errs, fmt.Errorf("chaos: %s: fetching the committed offsets: %w", what, err))
		}
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelClose()
	if err := g.side.Close(closeCtx); err != nil {
		errs = append(errs, fmt.Errorf("chaos: group side consumer: %w", err))
	}
	return errors.Join(errs...)
}

// member is one group consumer, from its start to its crash or the end of the run. Its
// fields are its goroutine's (the listener runs inside Poll and Close, on that goroutine).
type member struct {
	g    *groupWorkers
	id   int
	slot int
	c    *client.Consumer
	dial *severable
	// pending is, per partition, the next offset after the records delivered and not yet
	// committed with OK: what CommitSync commits.
	pending       map[client.TopicPartition]int64
	crashing      bool      // the listener records and commits nothing more
	firstAssigned time.Time // when it was first given partitions
}

func (g *groupWorkers) newMember(ctx context.Context, slot int) (*member, error) {
	m := &member{g: g, id: int(g.nextID.Add(1)), slot: slot, dial: &severable{}, pending: map[client.TopicPartition]int64{}}
	off, fileReads := false, false
	startCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := client.NewConsumer(startCtx, client.ConsumerConfig{
		Config: client.Config{
			Brokers: g.bootstrap, Dial: m.dial.dial,
			ClientID:       "sluice-chaos-group-" + strconv.Itoa(m.id),
			RequestTimeout: readerRequestTimeout, Logger: g.w.Logger,
		},
		GroupID: GroupID, EnableAutoCommit: &off, AutoOffsetReset: client.OffsetResetEarliest,
		SessionTimeout: groupSessionTimeout, HeartbeatInterval: groupHeartbeat, MaxPollInterval: groupMaxPollInterval,
		Assignors: []string{g.w.GroupAssignor}, FileReads: &fileReads,
		RebalanceListener: client.RebalanceFuncs{Assigned: m.assigned, Revoked: m.revoked, Lost: m.lost},
	})
	if err != nil {
		return nil, err
	}
	if err := c.Subscribe(g.w.TopicNames()...); err != nil {
		_ = c.Close(context.Background())
		return nil, err
	}
	m.c = c
	g.rec.Record(Event{Type: EvInfo, Group: GroupID, Consumer: m.id, Detail: fmt.Sprintf("group consumer %d started in slot %d", m.id, slot)})
	return m, nil
}

// consume polls, records and commits until ctx ends (it then closes the consumer, which
// commits on revocation and leaves the group, and reports false) or, with crashes allowed,
// until life has passed since the consumer was first given partitions (it then crashes the
// consumer and reports true): every consumer consumes a while, however long the group takes
// to rebalance.
func (m *member) consume(ctx context.Context, life time.Duration, rng *rand.Rand) bool {
	g := m.g
	what := fmt.Sprintf("group consumer %d", m.id)
	failures := 0 // Polls in a row that failed
	for {
		if ctx.Err() != nil {
			closeCtx, cancel := context.WithTimeout(context.Background(), groupCommitTimeout)
			err := m.c.Close(closeCtx)
			cancel()
			if err != nil {
				recordInfo(g.rec, 0, what+": closing", err)
			}
			return false
		}
		// A Poll ends with records, at the crash time, at the end of the run, or, while a
		// commit is owed, after pendingRetry: a refused commit is made again though no record
		// comes (else a member whose commit a rebalance refused after the writers stopped held
		// the group's drain for its whole minute, seed 4 of reassign,kill,process).
		var crashAt time.Time
		if !m.firstAssigned.IsZero() {
			crashAt = m.firstAssigned.Add(life)
		}
		var until time.Time
		if g.churn.Load() {
			until = crashAt
		}
		if retry := time.Now().Add(pendingRetry); len(m.pending) > 0 && (until.IsZero() || retry.Before(until)) {
			until = retry
		}
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if !until.IsZero() {
			pctx, cancel = context.WithDeadline(ctx, until)
		}
		recs, err := m.c.Poll(pctx)
		cancel()
		if len(recs) > 0 {
			m.deliver(recs)
		}
		if err == nil || ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			failures = 0
		} else {
			failures++
		}
		switch {
		case failures == 0:
		case failures >= maxPollFailures:
			// A consumer that keeps failing (a fatal group error) is replaced, as an
			// application would restart it: a crash as the checker sees it.
			recordInfo(g.rec, 0, what+": poll", err)
			m.crash(false, fmt.Sprintf("replaced after %d failed polls", failures))
			return true
		default:
			recordInfo(g.rec, 0, what+": poll", err)
			sleepCtx(ctx, readerBackoff)
		}
		crash := g.churn.Load() && !crashAt.IsZero() && time.Now().After(crashAt)
		if crash && rng.IntN(2) == 0 {
			m.crash(rng.IntN(2) == 0, "after processing, before the commit")
			return true
		}
		if len(m.pending) > 0 {
			m.commit()
		}
		if crash {
			m.crash(rng.IntN(2) == 0, "after the commit")
			return true
		}
	}
}

// pendingRetry bounds a Poll while a commit is owed (one refused, say, by a rebalance): the
// commit is then made again.
const pendingRetry = time.Second

// deliver records one Poll's records as delivered (processed) and marks them to commit.
func (m *member) deliver(recs []client.Record) {
	gen := m.c.GroupMetadata().Generation
	n := recordPoll(m.g.rec, Event{Type: EvDeliver, Group: GroupID, Consumer: m.id, Generation: gen}, recs, nil)
	m.g.stats.groupDelivered.Add(int64(n))
	for i := range recs {
		tp := client.TopicPartition{Topic: recs[i].Topic, Partition: recs[i].Partition}
		m.pending[tp] = max(m.pending[tp], recs[i].Offset+1)
	}
}

// commit commits what was delivered (CommitSync: the consumer's positions, which are the
// pending offsets) and records each partition's commit with its outcome.
func (m *member) commit() {
	g := m.g
	offs := make(map[client.TopicPartition]int64, len(m.pending))
	for tp, o := range m.pending {
		offs[tp] = o
	}
	gen := m.c.GroupMetadata().Generation
	start := g.rec.Now()
	ctx, cancel := context.WithTimeout(context.Background(), groupCommitTimeout)
	err := m.c.CommitSync(ctx)
	cancel()
	t := g.rec.Now()
	outcome, msg := OK, ""
	switch {
	case errors.Is(err, client.ErrCommitOutcomeUnknown):
		// Refused on a retry whose first attempt lost its answer: maybe applied.
		outcome, msg = Failed, err.Error()
	case errors.Is(err, client.ErrCommitFailed):
		outcome, msg = Refused, err.Error()
	case err != nil:
		outcome, msg = Failed, err.Error()
	}
	tps := make([]client.TopicPartition, 0, len(offs))
	for tp := range offs {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b client.TopicPartition) int { return compareTP(TopicPartition(a), TopicPartition(b)) })
	for _, tp := range tps {
		g.rec.Record(Event{T: t, Start: start, Type: EvCommit, Group: GroupID, Consumer: m.id, Generation: gen,
			Topic: tp.Topic, Partition: tp.Partition, Offset: offs[tp], Outcome: outcome, Err: msg})
	}
	g.stats.groupCommits.Add(1)
	if outcome != OK {
		return
	}
	g.noteCommitted(offs)
	for tp, o := range offs {
		if m.pending[tp] == o {
			delete(m.pending, tp)
		}
	}
}

// crash crashes the consumer: hard cuts its connections first, so that it cannot leave the
// group; either way it is closed without a commit.
func (m *member) crash(hard bool, when string) {
	g := m.g
	m.crashing = true
	how := "soft (closed without a commit: it leaves the group)"
	if hard {
		how = "hard (connections cut: its session must time out)"
		m.dial.sever()
	}
	g.rec.Record(Event{Type: EvConsumerCrash, Group: GroupID, Consumer: m.id, Generation: m.c.GroupMetadata().Generation,
		Detail: how + ", " + when})
	g.stats.groupCrashes.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.c.Close(ctx) // a hard crash's close fails to reach the coordinator, as it should
}

func (m *member) record(typ EventType, tps []client.TopicPartition, detail string) {
	gen := m.c.GroupMetadata().Generation
	t := m.g.rec.Now()
	for _, tp := range tps {
		m.g.rec.Record(Event{T: t, Type: typ, Group: GroupID, Consumer: m.id, Generation: gen, Topic: tp.Topic, Partition: tp.Partition, Detail: detail})
	}
}

func (m *member) assigned(_ context.Context, tps []client.TopicPartition) {
	if m.crashing {
		return
	}
	if len(tps) > 0 && m.firstAssigned.IsZero() {
		m.firstAssigned = time.Now()
	}
	m.record(EvAssign, tps, "")
}

// revoked commits what was delivered, then gives the partitions up.
func (m *member) revoked(_ context.Context, tps []client.TopicPartition) {
	if m.crashing {
		return
	}
	if slices.ContainsFunc(tps, func(tp client.TopicPartition) bool { _, ok := m.pending[tp]; return ok }) {
		m.commit()
	}
	m.record(EvRevoke, tps, "revoked")
	for _, tp := range tps {
		delete(m.pending, tp)
	}
}

// lost gives the partitions up without a commit (it would be refused).
func (m *member) lost(_ context.Context, tps []client.TopicPartition) {
	if m.crashing {
		return
	}
	m.record(EvRevoke, tps, "lost")
	for _, tp := range tps {
		delete(m.pending, tp)
	}
}

// errSevered is the error of a dial after sever.
var errSevered = errors.New("chaos: the consumer crashed (its connections are cut)")

// severable dials TCP connections and can cut them all at once, and every later one: a
// process crash as the other end sees it.
type severable struct {
	mu struct {
		sync.Mutex
		conns []net.Conn
		cut   bool
	}
}

func (s *severable) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	s.mu.Lock()
	cut := s.mu.cut
	s.mu.Unlock()
	if cut {
		return nil, errSevered
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cut {
		_ = nc.Close()
		return nil, errSevered
	}
	s.mu.conns = append(s.mu.conns, nc)
	return nc, nil
}

// sever closes every connection dialled and fails every later dial.
func (s *severable) sever() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.cut = true
	for _, nc := range s.mu.conns {
		_ = nc.Close()
	}
	s.mu.conns = nil
}
