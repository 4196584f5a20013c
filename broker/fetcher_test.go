package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/replication"
	"github.com/sluicemq/sluice/segment"
)

// The replica fetchers against a fake leader speaking net/wire (fakeLeader): the follower side
// alone, driven by the real replication state machine and real segment logs, with the leader's
// answers in the test's hands.

const (
	fakeLeaderID   int32 = 0
	fakeFollowerID int32 = 1
)

// fakeLeader serves Fetch (and ApiVersions, ListOffsets and, with a codec, OffsetForLeaderEpoch)
// from leader logs of its own, one per partition, honouring max wait (woken by the logs'
// appends) and partition max bytes (cut anywhere: a partial batch ends the records, as the real
// leader's sendfile does).
type fakeLeader struct {
	t  *testing.T
	ln net.Listener
	wg sync.WaitGroup

	mu struct {
		sync.Mutex
		logs map[topicPartition]*segment.Log
		// corrupt: the next that many Fetch answers with records flip a byte of the first batch
		// (inside its CRC).
		corrupt int
		// notLeader: the next that many partition answers are NOT_LEADER_OR_FOLLOWER (a
		// leader that has not applied its own leadership yet).
		notLeader int
		conns     []net.Conn
	}
	epoch   int32 // the partition's leader epoch the fake serves at
	fetches atomic.Int64
	// fetchOffsets gets every Fetch's fetch offset of each partition (buffered; not blocking).
	fetchOffsets chan int64
	// epochs is the leader's epoch cache, for OffsetForLeaderEpoch answers.
	epochs []replication.EpochEntry
	// sessions is the leader's fetch session cache (the broker's own): Fetch v2 requests go
	// through it as they do in handleFetch.
	sessions fetchSessions
	// requestBytes gets the size of every Fetch request body (buffered; not blocking).
	requestBytes chan int
}

func newFakeLeader(t *testing.T, epoch int32) *fakeLeader {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &fakeLeader{t: t, ln: ln, epoch: epoch, fetchOffsets: make(chan int64, 4096), requestBytes: make(chan int, 4096)}
	fl.mu.logs = map[topicPartition]*segment.Log{}
	fl.wg.Add(1)
	go fl.accept()
	t.Cleanup(fl.close)
	return fl
}

func (fl *fakeLeader) close() {
	_ = fl.ln.Close()
	fl.mu.Lock()
	for _, c := range fl.mu.conns {
		_ = c.Close()
	}
	fl.mu.Unlock()
	fl.wg.Wait()
}

// addLog gives the fake a leader log for tp.
func (fl *fakeLeader) addLog(tp topicPartition) *segment.Log {
	l, err := segment.Open(fl.t.TempDir(), segment.Options{})
	if err != nil {
		fl.t.Fatal(err)
	}
	fl.t.Cleanup(func() { _ = l.Close() })
	fl.mu.Lock()
	fl.mu.logs[tp] = l
	fl.mu.Unlock()
	return l
}

func (fl *fakeLeader) accept() {
	defer fl.wg.Done()
	for {
		c, err := fl.ln.Accept()
		if err != nil {
			return
		}
		fl.mu.Lock()
		fl.mu.conns = append(fl.mu.conns, c)
		fl.mu.Unlock()
		fl.wg.Add(1)
		go fl.serve(c)
	}
}

func (fl *fakeLeader) serve(c net.Conn) {
	defer fl.wg.Done()
	defer c.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, frame); err != nil {
			return
		}
		var h wire.RequestHeader
		body, err := h.ReadFrom(frame)
		if err != nil {
			return
		}
		resp := fl.answer(h, body)
		if resp == nil {
			return
		}
		if _, err := c.Write(wire.AppendResponseFrame(nil, h.CorrelationID, resp)); err != nil {
			return
		}
	}
}

func (fl *fakeLeader) answer(h wire.RequestHeader, body []byte) wire.Encoder {
	switch h.APIKey {
	case wire.APIVersions:
		return &wire.APIVersionsResponse{APIKeys: wire.SupportedAPIs()}
	case wire.Fetch:
		req := wire.FetchRequest{Version: h.APIVersion}
		if err := req.ReadFrom(body); err != nil {
			return nil
		}
		select {
		case fl.requestBytes <- len(body):
		default:
		}
		incremental := req.SessionID != 0 && req.SessionEpoch > 0
		sess, err := fl.sessions.begin(&req)
		if err != nil {
			return &wire.FetchResponse{Version: req.Version, ErrorCode: errorCode(err)}
		}
		resp := fl.fetch(&req)
		lens := make([]int32, 0, resp.NumPartitions())
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				lens = append(lens, int32(len(p.Records)))
			}
		}
		fl.sessions.answer(sess, incremental, resp, lens, make([]segment.Slice, len(lens)))
		return resp
	case wire.ListOffsets:
		var req wire.ListOffsetsRequest
		if err := req.ReadFrom(body); err != nil {
			return nil
		}
		resp := &wire.ListOffsetsResponse{}
		for _, t := range req.Topics {
			rt := wire.ListOffsetsResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				l := fl.log(topicPartition{t.Topic, p.Partition})
				off := int64(l.EndOffset())
				if p.Timestamp == wire.EarliestTimestamp {
					off = int64(l.StartOffset())
				}
				rt.Partitions = append(rt.Partitions, wire.ListOffsetsResponsePartition{Partition: p.Partition, Offset: off, Timestamp: -1})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case wire.OffsetForLeaderEpoch:
		req := wire.OffsetForLeaderEpochRequest{Version: h.APIVersion}
		resp := &wire.OffsetForLeaderEpochResponse{Version: h.APIVersion}
		if req.ReadFrom(body) != nil {
			return nil
		}
		for _, t := range req.Topics {
			rt := wire.OffsetForLeaderEpochTopicResult{Topic: t.Topic}
			for _, p := range t.Partitions {
				l := fl.log(topicPartition{t.Topic, p.Partition})
				cache := replication.New(replication.Config{}, replication.LogState{EndOffset: l.EndOffset(), Epochs: fl.epochs})
				e, end := cache.EndOffsetFor(p.LeaderEpoch)
				rt.Partitions = append(rt.Partitions, wire.OffsetForLeaderEpochPartitionResult{Partition: p.Partition, LeaderEpoch: e, EndOffset: int64(end)})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	return nil
}

func (fl *fakeLeader) log(tp topicPartition) *segment.Log {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.mu.logs[tp]
}

// fetch answers once some partition has records past its fetch offset, or max wait passed.
func (fl *fakeLeader) fetch(req *wire.FetchRequest) *wire.FetchResponse {
	fl.fetches.Add(1)
	deadline := time.NewTimer(time.Duration(req.MaxWaitMs) * time.Millisecond)
	defer deadline.Stop()
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			select {
			case fl.fetchOffsets <- p.FetchOffset:
			default:
			}
		}
	}
	for {
		var changed []<-chan struct{}
		resp := &wire.FetchResponse{Version: req.Version}
		have := false
		for _, t := range req.Topics {
			rt := wire.FetchResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				l := fl.log(topicPartition{t.Topic, p.Partition})
				if l == nil {
					rt.Partitions = append(rt.Partitions, wire.FetchResponsePartition{Partition: p.Partition, ErrorCode: wire.ErrUnknownTopicOrPartition})
					continue
				}
				fl.mu.Lock()
				notLeader := fl.mu.notLeader > 0
				if notLeader {
					fl.mu.notLeader--
				}
				fl.mu.Unlock()
				if notLeader {
					rt.Partitions = append(rt.Partitions, wire.FetchResponsePartition{Partition: p.Partition, ErrorCode: wire.ErrNotLeaderOrFollower})
					have = true
					continue
				}
				if p.CurrentLeaderEpoch >= 0 && p.CurrentLeaderEpoch < fl.epoch {
					rt.Partitions = append(rt.Partitions, wire.FetchResponsePartition{Partition: p.Partition, ErrorCode: wire.ErrFencedLeaderEpoch})
					have = true
					continue
				}
				changed = append(changed, l.Changed())
				end := l.EndOffset()
				res := wire.FetchResponsePartition{Partition: p.Partition, HighWatermark: int64(end), LastStableOffset: int64(end), LogStartOffset: int64(l.StartOffset())}
				switch {
				case p.FetchOffset > int64(end) || p.FetchOffset < int64(l.StartOffset()):
					res.ErrorCode = wire.ErrOffsetOutOfRange
					have = true
				case p.FetchOffset < int64(end):
					res.Records = fl.read(l, batch.Offset(p.FetchOffset), int(p.PartitionMaxBytes))
					have = true
				}
				rt.Partitions = append(rt.Partitions, res)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if have || req.MaxWaitMs <= 0 {
			return resp
		}
		// Park until an append to one of the logs, or max wait.
		wake := make(chan struct{})
		stop := make(chan struct{})
		for _, ch := range changed {
			go func() {
				select {
				case <-ch:
					select {
					case wake <- struct{}{}:
					case <-stop:
					}
				case <-stop:
				}
			}()
		}
		select {
		case <-wake:
			close(stop)
		case <-deadline.C:
			close(stop)
			return resp
		}
	}
}

// read is the leader log's bytes from the batch holding off, at most maxBytes (the first batch
// whole, as KIP-74).
func (fl *fakeLeader) read(l *segment.Log, off batch.Offset, maxBytes int) []byte {
	data := logBytes(fl.t, l)
	pos := 0
	for pos < len(data) {
		b, _, err := batch.Next(data[pos:])
		if err != nil {
			fl.t.Errorf("leader log: %v", err)
			return nil
		}
		if b.NextOffset() > off {
			break
		}
		pos += b.Size()
	}
	out := data[pos:]
	if first, _, err := batch.Next(out); err == nil && len(out) > maxBytes {
		out = out[:max(maxBytes, first.Size())]
	}
	out = append([]byte(nil), out...)
	fl.mu.Lock()
	if fl.mu.corrupt > 0 && len(out) > batch.CRCStart+1 {
		fl.mu.corrupt--
		out[batch.CRCStart+1] ^= 0xff // the attributes' high byte: covered by the CRC
	}
	fl.mu.Unlock()
	return out
}

// logBytes is a log's segment files end to end, as they are on disk (a follower's segments
// may begin at other offsets than the leader's: a truncation starts a segment).
func logBytes(t *testing.T, l *segment.Log) []byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(l.Dir(), "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("log segments %v (%v)", files, err)
	}
	slices.Sort(files) // by base offset: the names are zero-padded
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// followerHarness is a follower broker's fetchers without the rest of the broker: partitions
// built by hand, the leader at fakeLeader.
type followerHarness struct {
	t  *testing.T
	b  *Broker
	rf *replicaFetchers
}

func newFollowerHarness(t *testing.T, leader *fakeLeader, tweak func(*Config)) *followerHarness {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.NodeID = fakeFollowerID
	if os.Getenv("FETCHER_DEBUG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg.ReplicaFetchBackoff = 10 * time.Millisecond
	cfg.ReplicaFetchWait = 200 * time.Millisecond
	if tweak != nil {
		tweak(&cfg)
	}
	b := &Broker{cfg: cfg, logger: cfg.Logger}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	t.Cleanup(b.cancel)
	rf := newReplicaFetchers(b)
	addr := ""
	if leader != nil {
		addr = leader.ln.Addr().String()
	}
	rf.endpoint = func(id int32) (string, error) {
		if id != fakeLeaderID {
			return "", errors.New("no such broker")
		}
		return addr, nil
	}
	h := &followerHarness{t: t, b: b, rf: rf}
	t.Cleanup(rf.close)
	return h
}

// partition is a follower partition of tp following the fake leader at epoch.
func (h *followerHarness) partition(tp topicPartition, epoch int32, writeCaching bool) *partition {
	h.t.Helper()
	l, err := segment.Open(h.t.TempDir(), segment.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = l.Close() })
	p := &partition{tp: tp}
	p.current.Store(l)
	p.cfg.Store(&cluster.TopicConfig{WriteCaching: writeCaching})
	p.lead.Store(packLead(fakeLeaderID, epoch))
	p.rep = replication.New(replication.Config{ReplicaID: fakeFollowerID, LagTimeMax: 30 * time.Second, MinInsync: 1, WriteCaching: writeCaching},
		replication.LogState{StartOffset: l.StartOffset(), EndOffset: l.EndOffset(), DurableOffset: l.SyncedOffset(), HighWatermark: 0})
	h.become(p, fakeLeaderID, epoch)
	return p
}

// become makes p's replica a follower of leader at epoch.
func (h *followerHarness) become(p *partition, leader, epoch int32) {
	p.lead.Store(packLead(leader, epoch))
	p.repMu.Lock()
	p.rep.BecomeFollower(replication.FollowerUpdate{Leader: leader, LeaderEpoch: epoch, Replicas: []int32{leader, fakeFollowerID}}, time.Now())
	h.b.applyReady(p, p.rep.Ready())
	p.repMu.Unlock()
}

// appendAt appends batches of values to a leader log at epoch.
func appendAt(t *testing.T, l *segment.Log, epoch int32, batches ...[]string) {
	t.Helper()
	for _, vs := range batches {
		if _, err := l.Append(records(t, vs...), epoch); err != nil {
			t.Fatal(err)
		}
	}
}

func hw(p *partition) batch.Offset {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	return p.rep.HighWatermark()
}

// TestFollowerCatchesUpByteIdentical: a follower of an empty log fetches everything the
// leader has, in fetches cut mid-batch by replica.fetch.max.bytes (the partial batch at the end
// is dropped, then fetched whole the next time), then what the leader appends while it follows
// (the long poll wakes on the append); its log file is byte for byte the leader's (offsets and
// leader epochs as the leader stamped them), its high watermark the leader's, and with
// write.caching=false what it appended is fsynced before it fetches again. Two partitions share
// the one fetcher.
func TestFollowerCatchesUpByteIdentical(t *testing.T) {
	leader := newFakeLeader(t, 5)
	a, b := topicPartition{"t", 0}, topicPartition{"t", 1}
	la, lb := leader.addLog(a), leader.addLog(b)
	appendAt(t, la, 3, []string{"a1", "a2"}, []string{"a3"})
	appendAt(t, la, 5, []string{"a4", "a5", "a6"})
	appendAt(t, lb, 5, []string{"b1"})
	h := newFollowerHarness(t, leader, func(c *Config) { c.ReplicaFetchMaxBytes = 100 })
	pa, pb := h.partition(a, 5, false), h.partition(b, 5, true)
	h.rf.follow(pa)
	h.rf.follow(pb)
	if n, f := h.rf.fetching(); n != 2 || f != 1 {
		t.Fatalf("%d partitions on %d fetchers, want 2 on 1", n, f)
	}
	caughtUp := func(p *partition, l *segment.Log) bool {
		return p.log().EndOffset() == l.EndOffset() && hw(p) == l.EndOffset()
	}
	waitFor(t, 10*time.Second, "the follower catching up", func() bool { return caughtUp(pa, la) && caughtUp(pb, lb) })
	appendAt(t, la, 5, []string{"a7"})
	appendAt(t, lb, 5, []string{"b2", "b3"})
	waitFor(t, 10*time.Second, "the follower copying new appends", func() bool { return caughtUp(pa, la) && caughtUp(pb, lb) })
	for _, c := range []struct {
		p *partition
		l *segment.Log
	}{{pa, la}, {pb, lb}} {
		if got, want := logBytes(t, c.p.log()), logBytes(t, c.l); !bytes.Equal(got, want) {
			t.Errorf("%s: follower's log (%d bytes) differs from the leader's (%d bytes)", c.p.tp, len(got), len(want))
		}
	}
	if got := pa.log().SyncedOffset(); got != la.EndOffset() {
		t.Errorf("write.caching=false: follower fsynced to %d, want %d", got, la.EndOffset())
	}
	pa.repMu.Lock()
	epochs := pa.rep.Epochs()
	pa.repMu.Unlock()
	if want := []replication.EpochEntry{{Epoch: 3, StartOffset: 0}, {Epoch: 5, StartOffset: 3}}; !equalEpochs(epochs, want) {
		t.Errorf("follower's epoch cache %v, want %v", epochs, want)
	}
	h.rf.unfollow(pa)
	h.rf.unfollow(pb)
	waitFor(t, 10*time.Second, "the idle fetcher to exit", func() bool { _, f := h.rf.fetching(); return f == 0 })
}

func equalEpochs(a, b []replication.EpochEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFollowerRefusesCorruptBatch: batches from the leader that fail their CRC are refused
// (nothing of them is appended: the next fetches still ask from offset 0, and the log stays
// empty) and fetched again after the backoff; once the leader sends good bytes, the follower
// catches up.
func TestFollowerRefusesCorruptBatch(t *testing.T) {
	leader := newFakeLeader(t, 5)
	tp := topicPartition{"t", 0}
	l := leader.addLog(tp)
	appendAt(t, l, 5, []string{"x1", "x2"}, []string{"x3"})
	leader.mu.Lock()
	leader.mu.corrupt = 3
	leader.mu.Unlock()
	h := newFollowerHarness(t, leader, nil)
	p := h.partition(tp, 5, true)
	h.rf.follow(p)
	waitFor(t, 10*time.Second, "the follower catching up after the corrupt answers", func() bool {
		return p.log().EndOffset() == l.EndOffset()
	})
	// The first four fetches asked from 0: the three corrupt answers were not appended.
	for i := range 4 {
		if off := <-leader.fetchOffsets; off != 0 {
			t.Fatalf("fetch %d asked from %d: a corrupt batch was appended", i+1, off)
		}
	}
	if got, want := logBytes(t, p.log()), logBytes(t, l); !bytes.Equal(got, want) {
		t.Errorf("follower's log differs from the leader's")
	}
}

// TestFollowerFencedParksUntilFollowedAgain: a leader that answers FENCED_LEADER_EPOCH (the
// follower's epoch is older than the leader's) parks the partition: no more fetches for it
// until follow is called at the new epoch; then it fetches at that epoch and catches up.
func TestFollowerFencedParksUntilFollowedAgain(t *testing.T) {
	leader := newFakeLeader(t, 7)
	tp := topicPartition{"t", 0}
	l := leader.addLog(tp)
	appendAt(t, l, 7, []string{"y1"})
	h := newFollowerHarness(t, leader, nil)
	p := h.partition(tp, 6, true)
	h.rf.follow(p)
	waitFor(t, 10*time.Second, "a fenced answer", func() bool { return leader.fetches.Load() >= 1 })
	// Parked: while several backoffs pass, no fetch follows the fenced one.
	n := leader.fetches.Load()
	probe := time.NewTimer(20 * h.b.cfg.ReplicaFetchBackoff)
	<-probe.C
	if got := leader.fetches.Load(); got != n {
		t.Fatalf("%d fetches after the fenced answer, want none until follow", got-n)
	}
	h.become(p, fakeLeaderID, 7)
	h.rf.follow(p)
	waitFor(t, 10*time.Second, "the follower catching up at the new epoch", func() bool { return p.log().EndOffset() == l.EndOffset() })
}

// TestFollowerRetriesNotLeader: a leader that answers NOT_LEADER_OR_FOLLOWER (it has not
// applied its own leadership yet: the follower learned of it first) is asked again after the
// backoff, without a new follow, and the follower catches up. Parking it until the next
// leader change, as FENCED_LEADER_EPOCH does, left the follower out of the ISR for good
// (found by sluice chaos after a kill-majority).
func TestFollowerRetriesNotLeader(t *testing.T) {
	leader := newFakeLeader(t, 7)
	tp := topicPartition{"t", 0}
	l := leader.addLog(tp)
	appendAt(t, l, 7, []string{"z1", "z2"})
	leader.mu.Lock()
	leader.mu.notLeader = 2
	leader.mu.Unlock()
	h := newFollowerHarness(t, leader, nil)
	p := h.partition(tp, 7, true)
	h.rf.follow(p)
	waitFor(t, 10*time.Second, "the follower catching up after the not-leader answers", func() bool {
		return p.log().EndOffset() == l.EndOffset()
	})
	if n := leader.fetches.Load(); n < 3 {
		t.Errorf("%d fetches: want the two refused and at least one more", n)
	}
}

// TestFetcherCloseWithPausedLeader: a leader that accepts the connection and then never
// answers (paused), and one whose dial never completes, do not hold up close: it returns at
// once, well before the fetch's own deadline (max wait plus the margin, here minutes).
func TestFetcherCloseWithPausedLeader(t *testing.T) {
	for _, mode := range []string{"silent", "dial stalls"} {
		t.Run(mode, func(t *testing.T) {
			dialed := make(chan struct{}, 16)
			var peers []net.Conn
			var mu sync.Mutex
			h := newFollowerHarness(t, nil, func(c *Config) {
				c.ReplicaLagTimeMax = time.Hour
				c.ReplicaFetchWait = 30 * time.Minute
				c.replicaDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
					dialed <- struct{}{}
					if mode == "dial stalls" {
						<-ctx.Done()
						return nil, ctx.Err()
					}
					a, b := net.Pipe() // nobody reads b: the leader is paused
					mu.Lock()
					peers = append(peers, b)
					mu.Unlock()
					return a, nil
				}
			})
			t.Cleanup(func() {
				mu.Lock()
				defer mu.Unlock()
				for _, c := range peers {
					_ = c.Close()
				}
			})
			p := h.partition(topicPartition{"t", 0}, 5, true)
			h.rf.follow(p)
			<-dialed
			done := make(chan struct{})
			go func() {
				h.rf.close()
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("close waits on a paused leader")
			}
		})
	}
}

// TestFollowOnlyLiveLeaders: follow routes a partition to the fetcher of its leader and
// index, moves it when its leader changes, and follows nothing for a partition without a
// leader or led by this broker; unfollow and close leave no fetcher behind.
func TestFollowOnlyLiveLeaders(t *testing.T) {
	h := newFollowerHarness(t, nil, func(c *Config) {
		c.NumReplicaFetchers = 3
		c.replicaDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
	})
	h.rf.endpoint = func(int32) (string, error) { return "127.0.0.1:1", nil }
	var parts []*partition
	for i := range int32(6) {
		p := h.partition(topicPartition{"t", i}, 5, true)
		parts = append(parts, p)
		h.rf.follow(p)
	}
	n, f := h.rf.fetching()
	if n != 6 || f < 1 || f > 3 {
		t.Fatalf("%d partitions on %d fetchers, want 6 on 1 to 3", n, f)
	}
	self := h.partition(topicPartition{"u", 0}, 5, true)
	self.lead.Store(packLead(fakeFollowerID, 6))
	h.rf.follow(self)
	none := h.partition(topicPartition{"u", 1}, 5, true)
	none.lead.Store(packLead(cluster.NoLeader, 6))
	h.rf.follow(none)
	if n, _ := h.rf.fetching(); n != 6 {
		t.Fatalf("%d partitions followed, want 6 (not the one led here, nor the leaderless one)", n)
	}
	h.become(parts[0], fakeLeaderID+10, 6)
	h.rf.follow(parts[0])
	h.rf.mu.Lock()
	moved := h.rf.mu.where[parts[0]].f.key.leader
	h.rf.mu.Unlock()
	if moved != fakeLeaderID+10 {
		t.Fatalf("partition follows %d after its leader moved, want %d", moved, fakeLeaderID+10)
	}
	for _, p := range parts {
		h.rf.unfollow(p)
	}
	waitFor(t, 10*time.Second, "every fetcher to exit", func() bool { n, f := h.rf.fetching(); return n == 0 && f == 0 })
	h.rf.close()
	h.rf.follow(parts[1])
	if n, f := h.rf.fetching(); n != 0 || f != 0 {
		t.Fatalf("follow after close: %d partitions on %d fetchers", n, f)
	}
}

// TestFollowerTruncatesDivergentLogToEpochEnd: a follower whose log went on at an epoch the
// new leader never had (epoch 4, offsets 3 to 5, its checkpointed high watermark at 5) asks
// the leader where its latest epoch ends (OffsetForLeaderEpoch), hears that the leader's log
// has epoch 3 ending at 3 (KIP-279: an older epoch than asked), truncates to 3 (not to its
// high watermark, which would keep records 3 and 4 that the leader does not have), and then
// copies the leader's epoch 5 from 3: its log ends byte-identical to the leader's, with the
// leader's epoch cache.
func TestFollowerTruncatesDivergentLogToEpochEnd(t *testing.T) {
	leader := newFakeLeader(t, 6)
	tp := topicPartition{"t", 0}
	l := leader.addLog(tp)
	common := [][]byte{records(t, "c1", "c2"), records(t, "c3")} // the same bytes on both
	appendBytes := func(l *segment.Log) {
		for _, b := range common {
			if _, err := l.Append(append([]byte(nil), b...), 3); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendBytes(l)
	appendAt(t, l, 5, []string{"l4", "l5"}, []string{"l6", "l7", "l8"})
	leader.epochs = []replication.EpochEntry{{Epoch: 3, StartOffset: 0}, {Epoch: 5, StartOffset: 3}}

	h := newFollowerHarness(t, leader, nil)
	fl, err := segment.Open(t.TempDir(), segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fl.Close() })
	appendBytes(fl)
	appendAt(t, fl, 4, []string{"z4", "z5", "z6"})
	p := &partition{tp: tp}
	p.current.Store(fl)
	p.cfg.Store(&cluster.TopicConfig{WriteCaching: true})
	p.rep = replication.New(replication.Config{ReplicaID: fakeFollowerID, LagTimeMax: time.Minute, MinInsync: 1, WriteCaching: true},
		replication.LogState{EndOffset: fl.EndOffset(), DurableOffset: fl.EndOffset(), HighWatermark: 5,
			Epochs: []replication.EpochEntry{{Epoch: 3, StartOffset: 0}, {Epoch: 4, StartOffset: 3}}})
	h.become(p, fakeLeaderID, 6)
	h.rf.follow(p)
	waitFor(t, 10*time.Second, "the follower to truncate and catch up", func() bool {
		return p.log().EndOffset() == l.EndOffset() && bytes.Equal(logBytes(t, p.log()), logBytes(t, l))
	})
	p.repMu.Lock()
	epochs := p.rep.Epochs()
	p.repMu.Unlock()
	if !equalEpochs(epochs, leader.epochs) {
		t.Errorf("follower's epoch cache %v, want the leader's %v", epochs, leader.epochs)
	}
}

// TestFollowerFetchSession: a follower of many partitions on a leader with fetch sessions
// (Fetch v2) opens one session and, once caught up, sends requests that list no partition at
// all (nothing changed) and gets answers that list none; an append to one partition comes back
// in an incremental answer naming that partition alone, and the follower copies it. A leader
// that lost the session (evicted, restarted) answers FETCH_SESSION_ID_NOT_FOUND: the follower
// starts a new session with a full fetch and goes on.
func TestFollowerFetchSession(t *testing.T) {
	leader := newFakeLeader(t, 5)
	const n = 20
	var logs []*segment.Log
	var parts []*partition
	h := newFollowerHarness(t, leader, func(c *Config) { c.ReplicaFetchWait = 20 * time.Millisecond })
	for i := range int32(n) {
		tp := topicPartition{"t", i}
		l := leader.addLog(tp)
		appendAt(t, l, 5, []string{"v"})
		logs = append(logs, l)
		p := h.partition(tp, 5, true)
		parts = append(parts, p)
		h.rf.follow(p)
	}
	caughtUp := func() bool {
		for i, p := range parts {
			if p.log().EndOffset() != logs[i].EndOffset() || hw(p) != logs[i].EndOffset() {
				return false
			}
		}
		return true
	}
	waitFor(t, 10*time.Second, "the follower catching up", caughtUp)
	if got := leader.sessions.len(); got != 1 {
		t.Fatalf("leader holds %d fetch sessions, want 1", got)
	}
	// Idle rounds: the request lists nothing (its fixed fields, an empty topic array and an
	// empty forgotten array: well under one partition's entry per partition).
	idle := func() {
		t.Helper()
		for {
			select {
			case size := <-leader.requestBytes:
				if size < 64 {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no idle incremental fetch")
			}
		}
	}
	idle()
	appendAt(t, logs[7], 5, []string{"w1", "w2"})
	waitFor(t, 10*time.Second, "the follower copying the append", caughtUp)
	idle()
	leader.sessions.mu.Lock()
	for id := range leader.sessions.byID {
		leader.sessions.removeLocked(id)
	}
	leader.sessions.mu.Unlock()
	appendAt(t, logs[13], 5, []string{"x"})
	waitFor(t, 10*time.Second, "the follower going on after the session was lost", caughtUp)
	if got := leader.sessions.len(); got != 1 {
		t.Fatalf("leader holds %d fetch sessions after the loss, want 1 (the new one)", got)
	}
	for i, p := range parts {
		if !bytes.Equal(logBytes(t, p.log()), logBytes(t, logs[i])) {
			t.Errorf("%s: follower's log differs from the leader's", p.tp)
		}
	}
}

// TestFollowerBehindLeaderStartRestartsThere: a follower whose log ends below the leader's log
// start (the leader's retention deleted what it lacks) is answered OFFSET_OUT_OF_RANGE, asks
// the leader's bounds (ListOffsets as a replica), restarts its log empty at the leader's start
// (a full truncation) and copies the leader from there.
func TestFollowerBehindLeaderStartRestartsThere(t *testing.T) {
	leader := newFakeLeader(t, 5)
	tp := topicPartition{"t", 0}
	l := leader.addLog(tp)
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	appendAt(t, l, 5, []string{"s1", "s2"}, []string{"s3"})
	h := newFollowerHarness(t, leader, nil)
	p := h.partition(tp, 5, true)
	h.rf.follow(p)
	waitFor(t, 10*time.Second, "the follower restarting at the leader's start", func() bool {
		return p.log().StartOffset() == 100 && p.log().EndOffset() == l.EndOffset()
	})
	if !bytes.Equal(logBytes(t, p.log()), logBytes(t, l)) {
		t.Error("follower's log differs from the leader's")
	}
}

// TestBehindBackoff: a follower told the leader has not applied the leadership yet asks again
// after 10 ms, then 20, 40, ... up to replica.fetch.backoff.ms, however many answers in a row.
func TestBehindBackoff(t *testing.T) {
	for _, tc := range []struct {
		max  time.Duration
		n    int
		want time.Duration
	}{
		{time.Second, 0, 10 * time.Millisecond},
		{time.Second, 1, 20 * time.Millisecond},
		{time.Second, 6, 640 * time.Millisecond},
		{time.Second, 7, time.Second},
		{time.Second, 1000, time.Second},
		{5 * time.Millisecond, 0, 5 * time.Millisecond}, // a backoff shorter than the first step
	} {
		if got := behindBackoff(tc.max, tc.n); got != tc.want {
			t.Errorf("behindBackoff(%v, %d) = %v, want %v", tc.max, tc.n, got, tc.want)
		}
	}
}
