package broker

// Replica fetchers: the follower side of replication (issue #23).
//
// A broker that follows partitions runs one fetcher goroutine per (leader broker, fetcher
// index), the index being a hash of the topic and partition modulo num.replica.fetchers, so
// that a leader's partitions are spread over that many connections. Each fetcher loops:
//
//  1. It takes each of its partitions' next request from the replication state machine
//     (rep.NextFetch, under the partition's repMu).
//  2. The partitions whose local log must first find where it diverges from the leader's
//     (FetchEpochQuery) go in one OffsetForLeaderEpoch request; each answer goes to
//     rep.EpochAnswered, and the truncation it leads to is made here (never to the high
//     watermark: to the end of the last epoch both logs share, KIP-101/KIP-279).
//  3. The others (FetchRecords) go in one long-polling Fetch: the leader answers once it has
//     replica.fetch.min.bytes for them or replica.fetch.wait.max.ms passed, woken by its appends.
//     Each partition's batches are appended unchanged (AppendAsFollower keeps the leader's
//     offsets and epochs and refuses a batch whose CRC is bad or whose offsets do not follow
//     the log end), and the leader's high watermark and log start go to rep.FetchAnswered.
//  4. With write.caching=false the leader counts a follower toward the high watermark only up to
//     the durable offset it reports, so the next fetch waits (a short bound at most) until the
//     flusher has fsynced what the last one appended: a fetch sent earlier would report a stale
//     durable offset and could then park on the leader for a whole max wait while acks=all
//     producers wait on it.
//
// Fetch sessions (KIP-227, Fetch v2; fetchsession.go has the leader's side): a fetcher opens a
// session with its first full fetch, then sends only the partitions whose fetch fields changed
// and forgets those it stops fetching (parked, backing off, moved, unfollowed); the leader
// answers only the partitions with news. A session the leader lost (FETCH_SESSION_ID_NOT_FOUND,
// INVALID_FETCH_SESSION_EPOCH) or a connection error starts a new one with a full fetch.
//
// Errors: a connection error closes the connection and the fetcher tries again after
// replica.fetch.backoff.ms. FENCED_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER park the partition
// until the reconciler calls follow again (a new leader or epoch); UNKNOWN_LEADER_EPOCH and
// UNKNOWN_TOPIC_OR_PARTITION (the leader has not applied the metadata yet), a refused batch and
// any other error retry the partition after the backoff. OFFSET_OUT_OF_RANGE asks the leader
// its log bounds (ListOffsets as a replica) for rep.OutOfRange.
//
// The leader's log start moving past the follower's is reported to rep (FetchAnswered); the
// follower's own segments below it are left to its own retention, which applies the same topic
// config (Kafka deletes them at once; a follower that keeps them only serves them if it leads).
//
// Lock order: p.repMu, then rf.mu (follow and unfollow take rf.mu alone, so the reconciler may
// call them with or without p.repMu held). A partition's append and truncation run under its
// repMu: the role and epoch checked before them must still hold when the bytes land (a
// partition that became leader meanwhile must not take a stale response's batches), as
// Kafka's fetcher holds its partition map lock across them. On a follower that lock is taken
// only by the fetcher, the reconciler and describe, never by produce or fetch; no lock is held
// across a network round trip.

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/replication"
)

// replicaFetchers are the replica fetchers of the partitions this broker follows: one per
// (leader broker, fetcher index), each one connection with one long-polling fetch for all its
// partitions.
//
// The leader side (replica.go, the reconciler) calls follow when a partition's replica becomes
// a follower of a live leader (after rep.BecomeFollower), and unfollow when it stops following
// (leader, offline, deleted, closed); both are cheap and never block on the network. A nil
// *replicaFetchers does nothing.
//
// Ownership: mu guards the fetcher map and every fetcher's partition set; a fetcher goroutine
// owns its connection and the fetch state of the partitions it holds. A fetcher left with no
// partitions removes itself from the map (under mu) and exits; close stops the others and waits.
type replicaFetchers struct {
	b   *Broker
	cfg fetcherConfig
	// endpoint is the PLAINTEXT host:port of a broker (b.leaderEndpoint: its registration in
	// the metadata).
	endpoint func(id int32) (string, error)
	ctx      context.Context // cancelled by close: fetchers stop, connections close
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       struct {
		sync.Mutex
		closed   bool
		fetchers map[fetcherKey]*replicaFetcher
		where    map[*partition]*followed // the fetcher each followed partition is with
	}
}

// fetcherConfig is the fetchers' settings, defaults filled in.
type fetcherConfig struct {
	self            int32
	numFetchers     int
	maxWait         time.Duration
	minBytes        int32
	maxBytes        int32 // the whole response
	partitionBytes  int32
	backoff         time.Duration
	maxFrame        int // the largest response frame read
	dial            func(ctx context.Context, network, addr string) (net.Conn, error)
	timeoutMargin   time.Duration // beyond maxWait, for a response to arrive
	syncWaitMax     time.Duration // the longest the next fetch waits for the last one's fsync
	messageMaxBytes int
}

// fetcherKey names one fetcher.
type fetcherKey struct {
	leader int32
	index  int
}

// Bounds of the fetcher's waits.
const (
	// replicaTimeoutMargin is how long past a request's max wait the fetcher waits for its
	// response before it drops the connection: a paused leader costs that, not a hang.
	replicaTimeoutMargin = 5 * time.Second
	// replicaSyncWaitMax bounds the wait of the next fetch for the fsync of what the last one
	// appended (write.caching=false): past it, the fetch goes with the durable offset it has.
	replicaSyncWaitMax = 250 * time.Millisecond
	// epochUnknown says a followed partition's latest local epoch must be read from rep.
	epochUnknown int32 = -2
)

// newReplicaFetchers returns b's fetchers, none running until follow.
func newReplicaFetchers(b *Broker) *replicaFetchers {
	c := b.cfg
	d := DefaultConfig()
	dial := c.replicaDial
	if dial == nil {
		var nd net.Dialer
		dial = nd.DialContext
	}
	fc := fetcherConfig{
		self:            c.NodeID,
		numFetchers:     positive(c.NumReplicaFetchers, d.NumReplicaFetchers),
		maxWait:         positive(c.ReplicaFetchWait, d.ReplicaFetchWait),
		minBytes:        int32(positive(c.ReplicaFetchMinBytes, d.ReplicaFetchMinBytes)),
		maxBytes:        int32(positive(c.ReplicaFetchResponseMaxBytes, d.ReplicaFetchResponseMaxBytes)),
		partitionBytes:  int32(positive(c.ReplicaFetchMaxBytes, d.ReplicaFetchMaxBytes)),
		backoff:         positive(c.ReplicaFetchBackoff, d.ReplicaFetchBackoff),
		dial:            dial,
		timeoutMargin:   replicaTimeoutMargin,
		syncWaitMax:     replicaSyncWaitMax,
		messageMaxBytes: int(positive(c.MessageMaxBytes, d.MessageMaxBytes)),
	}
	// A response holds at most maxBytes of records, except that its first batch is sent whole
	// however large (KIP-74): one batch of message.max.bytes, plus the metadata around them.
	fc.maxFrame = int(max(fc.maxBytes, fc.partitionBytes)) + fc.messageMaxBytes + 1<<20
	rf := &replicaFetchers{b: b, cfg: fc, endpoint: b.leaderEndpoint}
	rf.ctx, rf.cancel = context.WithCancel(b.ctx)
	rf.mu.fetchers = map[fetcherKey]*replicaFetcher{}
	rf.mu.where = map[*partition]*followed{}
	return rf
}

// index is the fetcher index of tp (Kafka's abs(31 * topic.hashCode + partition) % n, with
// FNV-1a for the topic's hash).
func (rf *replicaFetchers) index(tp topicPartition) int {
	if rf.cfg.numFetchers <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(tp.topic))
	return int((h.Sum32()*31 + uint32(tp.partition)) % uint32(rf.cfg.numFetchers))
}

// follow starts (or moves) fetching p from its leader. The leader is the one the committed
// metadata names (p.leadership, which the reconciler sets with the replica's role); a fetcher
// that finds rep.NextFetch naming another leader moves the partition there itself. Following
// again at the same leader wakes a partition parked on a fenced or not-leader answer.
func (rf *replicaFetchers) follow(p *partition) {
	if rf == nil {
		return
	}
	leader, _ := p.leadership()
	rf.followAt(p, leader)
}

// followAt registers p with the fetcher of leader (follow, and a fetcher moving p).
func (rf *replicaFetchers) followAt(p *partition, leader int32) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.mu.closed {
		return
	}
	if leader == cluster.NoLeader || leader == rf.cfg.self {
		rf.removeLocked(p)
		return
	}
	key := fetcherKey{leader: leader, index: rf.index(p.tp)}
	if fl := rf.mu.where[p]; fl != nil {
		if fl.f.key == key {
			fl.gen++
			fl.f.kick()
			return
		}
		rf.removeLocked(p)
	}
	f := rf.mu.fetchers[key]
	if f == nil {
		f = &replicaFetcher{rf: rf, key: key, wake: make(chan struct{}, 1), parts: map[*partition]*followed{}}
		f.ctx, f.cancel = context.WithCancel(rf.ctx)
		f.kickOnSync = func(error) { f.kick() }
		rf.mu.fetchers[key] = f
		rf.wg.Add(1)
		go f.run()
	}
	fl := &followed{p: p, f: f, gen: 1, lastEpoch: epochUnknown, durable: -1}
	f.parts[p] = fl
	rf.mu.where[p] = fl
	f.kick()
}

// unfollow stops fetching p; a fetch in flight for it is dropped when it returns.
func (rf *replicaFetchers) unfollow(p *partition) {
	if rf == nil {
		return
	}
	rf.mu.Lock()
	rf.removeLocked(p)
	rf.mu.Unlock()
}

func (rf *replicaFetchers) removeLocked(p *partition) {
	fl := rf.mu.where[p]
	if fl == nil {
		return
	}
	delete(rf.mu.where, p)
	delete(fl.f.parts, p)
	if f := fl.f; len(f.parts) == 0 {
		// Nothing left to fetch: the fetcher stops now, its dial or fetch in flight dropped
		// (follow starts a new one for this leader if it is needed again).
		delete(rf.mu.fetchers, f.key)
		f.cancel()
	}
	fl.f.kick()
}

// registered reports whether fl is still how p is followed: a response for a partition
// unfollowed or moved since its request was sent is dropped.
func (rf *replicaFetchers) registered(fl *followed) bool {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	return rf.mu.where[fl.p] == fl
}

// close stops every fetcher and waits for them. Follow does nothing afterwards.
func (rf *replicaFetchers) close() {
	if rf == nil {
		return
	}
	rf.mu.Lock()
	rf.mu.closed = true
	rf.mu.Unlock()
	rf.cancel()
	rf.wg.Wait()
}

// fetching reports how many partitions are followed, and by how many fetchers (tests,
// describe).
func (rf *replicaFetchers) fetching() (partitions, fetchers int) {
	if rf == nil {
		return 0, 0
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	return len(rf.mu.where), len(rf.mu.fetchers)
}

// followed is one partition a fetcher holds. gen is guarded by rf.mu; the rest is the fetcher
// goroutine's.
type followed struct {
	p   *partition
	f   *replicaFetcher
	gen uint64 // bumped by every follow: a parked partition fetches again

	parkedGen uint64    // parked at this gen (0: not parked) until follow bumps gen
	notBefore time.Time // backoff: no request before
	// behind counts the answers in a row saying the leader has not applied the leadership yet
	// (leaderBehindBackoff); an answer without an error resets it.
	behind int
	// lastEpoch is the latest leader epoch in the local log's epoch cache (epochUnknown: read
	// it from rep), to tell rep.Appended which appended batches start a new epoch.
	lastEpoch int32
	// durable is the fsynced end last reported with rep.Synced (-1: none yet).
	durable batch.Offset
	// syncTo is the end the last append left, which the next fetch waits to see fsynced
	// (write.caching=false), since syncSince; 0: nothing to wait for.
	syncTo    batch.Offset
	syncSince time.Time
	// truncate is a truncation rep asked for that failed: it is tried again each round (rep
	// asks for no fetch until it is reported).
	truncate *replication.Truncation
}

// replicaFetcher is one fetcher goroutine and its connection.
type replicaFetcher struct {
	rf  *replicaFetchers
	key fetcherKey
	// ctx ends when the fetchers close or this one has no partitions left (its round trip in
	// flight then returns at once).
	ctx              context.Context
	cancel           context.CancelFunc
	wake             chan struct{}                // buffered 1: follow, unfollow and fsyncs wake the loop
	kickOnSync       func(error)                  // f.kick as a group-commit callback, bound once
	parts            map[*partition]*followed     // guarded by rf.mu
	conn             *replicaConn                 // the goroutine's
	addr             string                       // the leader's endpoint conn is to
	round            []roundPart                  // the partitions of this round, reused
	queries, fetches []roundPart                  // the round's two requests' partitions, reused
	snaps            []snap                       // the partitions the round considers, reused
	fetch            wire.FetchRequest            // reused
	resp             wire.FetchResponse           // reused
	index            map[topicPartition]roundPart // the round's fetched partitions by name, reused
	sess             fetcherSession               // the fetch session with the leader (Fetch v2)
}

// roundPart is one partition's request in a round.
type roundPart struct {
	fl   *followed
	plan replication.FetchPlan
}

func (f *replicaFetcher) kick() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// attrs are a log line's attributes: the fetcher's, then kv.
func (f *replicaFetcher) attrs(kv ...any) []any {
	return append([]any{"leader", f.key.leader, "fetcher", f.key.index}, kv...)
}

// run is the fetcher's loop, until close or until it has no partitions left.
func (f *replicaFetcher) run() {
	rf := f.rf
	defer rf.wg.Done()
	defer f.cancel()
	defer func() { f.conn.close() }()
	for {
		if f.ctx.Err() != nil {
			return
		}
		snapshot, ok := f.snapshot()
		if !ok {
			return
		}
		now := time.Now()
		wait := f.plan(snapshot, now)
		if wait > 0 {
			f.idle(wait)
			continue
		}
		queries, fetches := f.queries[:0], f.fetches[:0]
		for _, rp := range f.round {
			if rp.plan.Kind == replication.FetchEpochQuery {
				queries = append(queries, rp)
			} else {
				fetches = append(fetches, rp)
			}
		}
		f.queries, f.fetches = queries, fetches
		if len(queries) == 0 && len(fetches) == 0 {
			f.idle(0)
			continue
		}
		if err := f.connect(); err != nil {
			f.connError(err)
			continue
		}
		if len(queries) > 0 {
			if err := f.queryEpochs(queries); err != nil {
				f.connError(err)
				continue
			}
		}
		if len(fetches) > 0 {
			if err := f.fetchRecords(fetches); err != nil {
				f.connError(err)
				continue
			}
		}
	}
}

// snapshot lists the fetcher's partitions with their gens; with none left, the fetcher leaves
// the map and reports false.
func (f *replicaFetcher) snapshot() ([]snap, bool) {
	rf := f.rf
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if len(f.parts) == 0 || rf.mu.closed {
		if rf.mu.fetchers[f.key] == f {
			delete(rf.mu.fetchers, f.key)
		}
		return nil, false
	}
	out := f.snaps[:0]
	for _, fl := range f.parts {
		out = append(out, snap{fl, fl.gen})
	}
	f.snaps = out
	return out, true
}

type snap struct {
	fl  *followed
	gen uint64
}

// plan fills f.round with the requests of this round. It returns how long to wait first
// (zero: send now), for a pending fsync of the last round's appends: the whole fetch waits, as
// every partition in it reports its durable offset.
func (f *replicaFetcher) plan(parts []snap, now time.Time) time.Duration {
	f.round = f.round[:0]
	var wait time.Duration
	for _, s := range parts {
		fl := s.fl
		if fl.parkedGen != 0 {
			if fl.parkedGen == s.gen {
				continue
			}
			fl.parkedGen = 0 // followed again since it was parked
			fl.notBefore = time.Time{}
		}
		if now.Before(fl.notBefore) {
			continue
		}
		p := fl.p
		if f.rf.b.throttledFollower(p) {
			// A replica a move is adding, and the follower quota is spent: it waits, the
			// other partitions of the fetch do not (throttle.go).
			if until := f.rf.b.followerQuota.blockedUntil(now); !until.IsZero() {
				fl.notBefore = until
				continue
			}
		}
		l := p.log()
		if p.rep == nil || l == nil {
			continue
		}
		if fl.syncTo > 0 {
			if left := f.rf.cfg.syncWaitMax - now.Sub(fl.syncSince); l.SyncedOffset() < fl.syncTo && left > 0 {
				wait = max(wait, left) // woken by the fsync's callback, or at the bound
				continue
			}
			fl.syncTo = 0
		}
		p.repMu.Lock()
		if fl.truncate != nil {
			f.truncateLocked(fl, *fl.truncate)
		}
		if d := l.SyncedOffset(); d > fl.durable {
			fl.durable = d
			p.rep.Synced(d, now)
		}
		plan := p.rep.NextFetch()
		f.settleLocked(fl)
		p.repMu.Unlock()
		switch {
		case plan.Kind == replication.FetchNone:
			continue
		case plan.Leader != f.key.leader:
			// rep follows another leader than the metadata this fetcher was picked by said
			// (follow ran before the replica's role changed): move it.
			f.rf.followAt(p, plan.Leader)
			continue
		}
		f.round = append(f.round, roundPart{fl: fl, plan: plan})
	}
	// Some partitions wait for their fsync: the fetch waits with them (bounded), so that it
	// carries their durable offsets.
	return wait
}

// idle waits for a wake-up, a backoff to end, or d (0: the nearest backoff, or a wake-up).
func (f *replicaFetcher) idle(d time.Duration) {
	if d == 0 {
		d = f.rf.cfg.backoff
		now := time.Now()
		f.rf.mu.Lock()
		for _, fl := range f.parts {
			if fl.parkedGen == 0 && fl.notBefore.After(now) {
				d = min(d, fl.notBefore.Sub(now))
			}
		}
		f.rf.mu.Unlock()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.ctx.Done():
	case <-f.wake:
	case <-t.C:
	}
}

// connect dials the leader's PLAINTEXT endpoint if the fetcher has no connection.
func (f *replicaFetcher) connect() error {
	if f.conn != nil {
		return nil
	}
	addr, err := f.rf.endpoint(f.key.leader)
	if err != nil {
		return err
	}
	c, err := dialReplica(f.ctx, f.rf.cfg.dial, addr, f.rf.cfg.self, f.rf.cfg.maxFrame, f.rf.cfg.maxWait+f.rf.cfg.timeoutMargin)
	if err != nil {
		return err
	}
	f.conn, f.addr = c, addr
	return nil
}

// leaderEndpoint is broker id's PLAINTEXT advertised endpoint, from its registration.
func (b *Broker) leaderEndpoint(id int32) (string, error) {
	br, ok := b.ctrl.Metadata().Broker(id)
	if !ok || br.Port == 0 {
		return "", fmt.Errorf("%w: broker %d has no PLAINTEXT endpoint in the metadata", errReplicaConn, id)
	}
	return net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port))), nil
}

// connError drops the connection and backs off.
func (f *replicaFetcher) connError(err error) {
	f.conn.close()
	f.conn = nil
	f.sess.reset() // whether the leader took the last fetch is unknown: a new session
	if f.ctx.Err() != nil {
		return
	}
	f.rf.b.logger.Warn("replica fetcher", f.attrs("addr", f.addr, "err", err, "retry in", f.rf.cfg.backoff)...)
	t := time.NewTimer(f.rf.cfg.backoff)
	defer t.Stop()
	select {
	case <-f.ctx.Done():
	case <-t.C:
	}
}

// settleLocked hands rep's Ready to applyReady, making any truncation it asks for here first
// (applyReady gets it with Truncate nil). Called with fl.p.repMu held.
func (f *replicaFetcher) settleLocked(fl *followed) {
	p := fl.p
	for range 4 { // a truncation reported leads to a Ready without one
		rd := p.rep.Ready()
		tr := rd.Truncate
		rd.Truncate = nil
		if !rd.Empty() {
			f.rf.b.applyReady(p, rd)
		}
		if tr == nil {
			return
		}
		f.truncateLocked(fl, *tr)
	}
}

// truncateLocked makes the truncation rep asked for and reports it (rep.Truncated), or keeps
// it to try again after the backoff if the log refuses. Called with fl.p.repMu held.
func (f *replicaFetcher) truncateLocked(fl *followed, tr replication.Truncation) {
	p := fl.p
	l := p.log()
	start, end, size := l.StartOffset(), l.EndOffset(), l.Size()
	var err error
	switch {
	case tr.Fully:
		err = l.TruncateFullyAndStartAt(tr.To)
	case tr.To < end:
		err = l.TruncateTo(tr.To)
	}
	if err != nil {
		fl.truncate = &tr
		fl.notBefore = time.Now().Add(f.rf.cfg.backoff)
		f.rf.b.logger.Error("replica truncation failed", f.attrs("partition", p.tp.String(), "to", tr.To, "fully", tr.Fully, "err", err)...)
		return
	}
	fl.truncate = nil
	fl.lastEpoch = epochUnknown
	fl.durable = -1
	fl.syncTo = 0
	nstart, nend := l.StartOffset(), l.EndOffset()
	if tr.Fully || nend != end {
		f.rf.b.logger.Warn("replica truncated to the leader's log", f.attrs("partition", p.tp.String(),
			"from_start", start, "from_end", end, "to_start", nstart, "to_end", nend, "fully", tr.Fully,
			"bytes_dropped", size-l.Size())...)
	}
	p.rep.Truncated(nstart, nend)
}

// backoff retries fl after replica.fetch.backoff.ms.
func (f *replicaFetcher) backoff(fl *followed) {
	fl.notBefore = time.Now().Add(f.rf.cfg.backoff)
}

// park stops fetching fl until follow is called for it again.
func (f *replicaFetcher) park(fl *followed, gen uint64) {
	fl.parkedGen = gen
}

// partitionError acts on a leader's error for one partition (Fetch or OffsetForLeaderEpoch).
func (f *replicaFetcher) partitionError(rp roundPart, code wire.ErrorCode) {
	fl := rp.fl
	switch code {
	case wire.ErrFencedLeaderEpoch:
		// The leader is at a newer epoch than this broker's metadata: the reconciler calls
		// follow again at the new epoch (or unfollow); until then nothing the leader says can
		// be used.
		f.rf.mu.Lock()
		gen := fl.gen
		f.rf.mu.Unlock()
		f.park(fl, gen)
		f.rf.b.logger.Info("replica fetch parked until the next leader change", f.attrs("partition", fl.p.tp.String(),
			"leader_epoch", rp.plan.LeaderEpoch, "err", code)...)
	default:
		// UNKNOWN_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER: the leader has not applied the
		// change yet (a follower may learn of a leadership before its leader does), or this
		// broker's metadata is behind; back off and ask again. Parking here until the next
		// leader change waited for one that never came: the follower never fetched again and
		// the ISR stayed short (found by sluice chaos after a kill-majority). The leader is
		// usually milliseconds behind, so the wait starts short (leaderBehindBackoff) rather
		// than at Kafka's replica.fetch.backoff.ms: an acks=all write to the new leader waits
		// for this follower's next fetch.
		d := behindBackoff(f.rf.cfg.backoff, fl.behind)
		fl.behind++
		fl.notBefore = time.Now().Add(d)
		f.rf.b.logger.Debug("replica fetch backs off", f.attrs("partition", fl.p.tp.String(), "err", code, "for", d)...)
	}
}

// leaderBehindBackoff is the first wait after a leader answered that it does not know the
// leadership yet; each such answer in a row doubles it, up to replica.fetch.backoff.ms. (Found
// by sluice chaos: a move that took a partition's leadership to another broker stalled every
// acks=all write to it for 1.6 s, a follower's full backoff after asking the new leader
// before it had applied the change.)
const leaderBehindBackoff = 10 * time.Millisecond

// behindBackoff is the wait after the n+1st answer in a row saying the leader is behind:
// leaderBehindBackoff doubled n times, at most max (replica.fetch.backoff.ms).
func behindBackoff(max time.Duration, n int) time.Duration {
	return min(max, leaderBehindBackoff<<min(n, 16))
}
