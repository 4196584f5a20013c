package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/internal/faultnet"
	"github.com/sluicemq/sluice/net/wire"
)

// The replication tests' harness (issue #23): three combined broker+controller nodes in this
// process whose every link goes through a faultnet.Net, a producer that keeps a ledger of what
// was acknowledged where, and the checks run once the cluster has settled: every replica's log
// byte-identical up to the high watermark, every acknowledged record at the offset its ack gave.
//
// Each node has two addresses in the Net, so that a test can cut replication without cutting
// the controller quorum (the Jepsen case): node i's CONTROLLER plane (its controller listener and
// controllerDial) is id i, its data plane (its PLAINTEXT listener and replicaDial) is
// dataPlane+i. The test's producer dials as producerNode and its side connections as sideNode,
// so that isolating a node from the producer leaves the side door open.
const (
	dataPlane    int32 = 100
	producerNode int32 = 50
	sideNode     int32 = 60
)

// rcluster is the cluster. brokers[i] is nil while node i is down; cfgs[i] is what restarts it
// (on the same data directory and addresses).
type rcluster struct {
	t    testing.TB
	net  *faultnet.Net
	cfgs []Config
	logs []*tailBuffer

	mu      sync.Mutex
	brokers []*Broker
}

// replicationConfig are the timings of the replication tests: short sessions and lag times, so
// that a failure is detected in about a second or two, and short fetch waits and backoffs.
func replicationConfig(c *Config) {
	c.HeartbeatInterval = 150 * time.Millisecond
	c.SessionTimeout = 1500 * time.Millisecond
	c.ReplicaLagTimeMax = 2 * time.Second
	c.ReplicaFetchWait = 100 * time.Millisecond
	c.ReplicaFetchBackoff = 100 * time.Millisecond
	c.HighWatermarkCheckpoint = 200 * time.Millisecond
	c.ShutdownTimeout = 10 * time.Second
}

// newRCluster starts the three nodes with replicationConfig (then tweak, if set).
func newRCluster(t testing.TB, tweak func(*Config)) *rcluster {
	t.Helper()
	c := &rcluster{t: t, net: faultnet.New(), cfgs: make([]Config, 3), brokers: make([]*Broker, 3), logs: make([]*tailBuffer, 3)}
	t.Cleanup(func() { _ = c.net.Close() }) // after the brokers' cleanups (LIFO)
	var lns []net.Listener
	var voters []cluster.Voter
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		voters = append(voters, cluster.Voter{ID: int32(i), Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port})
	}
	for i := range 3 {
		id := int32(i)
		cfg := testConfig(t, t.TempDir())
		c.logs[i] = &tailBuffer{max: 256 << 10}
		cfg.Logger = slog.New(slog.NewTextHandler(c.logs[i], &slog.HandlerOptions{Level: slog.LevelInfo}))
		cfg.NodeID, cfg.NodeIDSet = id, true
		cfg.Voters = voters
		cfg.ControllerListen = lns[i].Addr().String()
		cfg.UnixPath = "-" // TCP only: every client connection goes through the Net
		first := lns[i]
		cfg.listen = func(network, addr string) (net.Listener, error) {
			if addr == cfg.ControllerListen {
				if first != nil { // the port the voters were told, held open until now
					l := first
					first = nil
					return c.net.Wrap(id, l), nil
				}
				return c.net.Listen(id)(network, addr)
			}
			return c.net.Listen(dataPlane+id)(network, addr)
		}
		cfg.controllerDial = c.net.Dialer(id)
		cfg.replicaDial = c.net.Dialer(dataPlane + id)
		replicationConfig(&cfg)
		if tweak != nil {
			tweak(&cfg)
		}
		c.cfgs[i] = cfg
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.brokers[i], errs[i] = Open(c.cfgs[i])
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
		for i := range 3 {
			if b := c.broker(i); b != nil {
				_ = b.Close(context.Background())
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("broker %d: %v", i, err)
		}
	}
	for i, b := range c.brokers {
		<-b.PartitionsOpen()
		// A restart listens on the same PLAINTEXT address, which the metadata advertises.
		c.cfgs[i].Listen = b.Addr().String()
	}
	return c
}

// broker is node i, nil while it is down.
func (c *rcluster) broker(i int) *Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[i]
}

// live is the nodes up.
func (c *rcluster) live() []int {
	var out []int
	for i := range 3 {
		if c.broker(i) != nil {
			out = append(out, i)
		}
	}
	return out
}

// bootstrap is every node's PLAINTEXT address (fixed across restarts).
func (c *rcluster) bootstrap() []string {
	out := make([]string, 3)
	for i, cfg := range c.cfgs {
		out[i] = cfg.Listen
	}
	return out
}

// kill stops node i as a crash would look to the cluster: no controlled shutdown (its
// leaderships move only once its session times out), and no clean-shutdown marker (its next
// start recovers its logs from their recovery points).
func (c *rcluster) kill(i int) {
	c.t.Helper()
	b := c.broker(i)
	if b == nil {
		c.t.Fatalf("kill %d: already down", i)
	}
	b.cfg.DisableControlledShutdown = true
	c.mu.Lock()
	c.brokers[i] = nil
	c.mu.Unlock()
	_ = b.Close(context.Background()) // a crash: what Close says does not matter
	if err := os.Remove(filepath.Join(c.cfgs[i].DataDir, cleanShutdownFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.t.Fatal(err)
	}
}

// loseTail makes node i (down) lose the last n bytes of the newest segment file of each of
// topic's partitions, as a disk that lost what it had acknowledged would (the cut falls
// anywhere, mid-batch included), and its recovery points, so that its next start scans
// every segment. Replication must make up for it: every acknowledged record is on another
// replica of the ISR.
func (c *rcluster) loseTail(i int, topic string, partitions int32, n int64) {
	c.t.Helper()
	if c.broker(i) != nil {
		c.t.Fatalf("loseTail %d: still up", i)
	}
	for part := range partitions {
		dir := filepath.Join(c.cfgs[i].DataDir, fmt.Sprintf("%s-%d", topic, part))
		logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
		if err != nil || len(logs) == 0 {
			c.t.Fatalf("node %d's segments of %s-%d: %v %v", i, topic, part, logs, err)
		}
		slices.Sort(logs) // zero-padded base offsets: the newest last
		fi, err := os.Stat(logs[len(logs)-1])
		if err != nil {
			c.t.Fatal(err)
		}
		if fi.Size() <= n {
			c.t.Fatalf("node %d's newest segment of %s-%d holds %d bytes: none to keep after losing %d", i, topic, part, fi.Size(), n)
		}
		if err := os.Truncate(logs[len(logs)-1], fi.Size()-n); err != nil {
			c.t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, "recovery-point")); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.t.Fatal(err)
		}
	}
}

// restart starts node i again on its data directory and addresses.
func (c *rcluster) restart(i int) {
	c.t.Helper()
	if c.broker(i) != nil {
		c.t.Fatalf("restart %d: still up", i)
	}
	var b *Broker
	var err error
	// The ports were just released: a few tries cover a slow release on a loaded machine.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err = Open(c.cfgs[i]); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling, bounded by the deadline
	}
	if err != nil {
		c.t.Fatalf("restart broker %d: %v", i, err)
	}
	<-b.PartitionsOpen()
	c.mu.Lock()
	c.brokers[i] = b
	c.mu.Unlock()
}

// isolate cuts node i from the other nodes on both planes and from the producer (sideNode
// still reaches it): a paused process or a partitioned host whose goroutines keep running.
func (c *rcluster) isolate(i int) {
	id := int32(i)
	for j := range int32(3) {
		if j != id {
			c.net.Cut(id, j)
			c.net.Cut(dataPlane+id, dataPlane+j)
		}
	}
	c.net.Cut(dataPlane+id, producerNode)
}

// createTopic creates an RF-3 topic with min.insync.replicas=2 (and configs) and waits until
// every partition has a leader and every node hosts its replicas.
func (c *rcluster) createTopic(name string, partitions int32, configs map[string]string) {
	c.t.Helper()
	all := map[string]string{"min.insync.replicas": "2"}
	for k, v := range configs {
		all[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.broker(c.live()[0]).Controller().CreateTopic(ctx, cluster.TopicSpec{Name: name, NumPartitions: partitions, ReplicationFactor: 3, Configs: all}); err != nil {
		c.t.Fatal(err)
	}
	waitFor(c.t, 20*time.Second, "topic "+name+" hosted with leaders everywhere", func() bool {
		for _, i := range c.live() {
			b := c.broker(i)
			tm, ok := b.Controller().Metadata().Topic(name)
			if !ok || len(tm.Partitions) != int(partitions) {
				return false
			}
			for _, pm := range tm.Partitions {
				if pm.Leader == cluster.NoLeader || b.partition(name, pm.Partition) == nil {
					return false
				}
			}
		}
		return true
	})
}

// meta is partition part of topic as node i's metadata has it.
func (c *rcluster) meta(i int, topic string, part int32) cluster.PartitionMeta {
	tm, ok := c.broker(i).Controller().Metadata().Topic(topic)
	if !ok || int(part) >= len(tm.Partitions) {
		return cluster.PartitionMeta{Leader: cluster.NoLeader}
	}
	return tm.Partitions[part]
}

// leaderOf is the leader of topic-part as a live node's metadata has it (NoLeader if none).
func (c *rcluster) leaderOf(topic string, part int32) int32 {
	return c.meta(c.live()[0], topic, part).Leader
}

// waitNewLeader waits until every live node's metadata names a leader of topic-part other than
// old, at a later epoch than oldEpoch, and returns it.
func (c *rcluster) waitNewLeader(topic string, part int32, old, oldEpoch int32, d time.Duration) int32 {
	c.t.Helper()
	var leader int32
	waitFor(c.t, d, fmt.Sprintf("a leader of %s-%d other than %d", topic, part, old), func() bool {
		leader = cluster.NoLeader
		for _, i := range c.live() {
			if int32(i) == old {
				continue
			}
			pm := c.meta(i, topic, part)
			if pm.Leader == cluster.NoLeader || pm.Leader == old || pm.LeaderEpoch <= oldEpoch {
				return false
			}
			leader = pm.Leader
		}
		return leader != cluster.NoLeader
	})
	return leader
}

// highWatermark asks node i for topic-part's latest offset (ListOffsets latest: the high
// watermark) through sideNode.
func (c *rcluster) highWatermark(ctx context.Context, i int, topic string, part int32) (batch.Offset, error) {
	conn, err := client.DialWith(ctx, c.net.Dialer(sideNode), c.cfgs[i].Listen, "rtest")
	if err != nil {
		return -1, err
	}
	defer conn.Close()
	var resp wire.ListOffsetsResponse
	if err := conn.Call(ctx, &wire.ListOffsetsRequest{ReplicaID: -1, Topics: []wire.ListOffsetsRequestTopic{
		{Topic: topic, Partitions: []wire.ListOffsetsRequestPartition{{Partition: part, CurrentLeaderEpoch: -1, Timestamp: wire.LatestTimestamp}}},
	}}, &resp); err != nil {
		return -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("ListOffsets answered %+v", resp)
	}
	pr := resp.Topics[0].Partitions[0]
	if pr.ErrorCode != wire.NoError {
		return -1, fmt.Errorf("ListOffsets %s-%d on %d: %v", topic, part, i, pr.ErrorCode)
	}
	return batch.Offset(pr.Offset), nil
}

// replicaState is what settle found of one partition, for its failure message.
type replicaState struct {
	leader int32
	epoch  int32
	isr    []int32
	hw     batch.Offset
	leo    [3]batch.Offset // -1: node down or not hosting it
	err    error
}

func (s replicaState) String() string {
	return fmt.Sprintf("leader %d epoch %d isr %v hw %d leo %v err %v", s.leader, s.epoch, s.isr, s.hw, s.leo, s.err)
}

// settled reports whether topic-part is settled: every node up, no move in progress, every
// replica (all three nodes, unless the partition has fewer) in the committed ISR of every
// node's metadata, and every replica's log end equal to the leader's high watermark (which is
// then the leader's log end too).
func (c *rcluster) settled(topic string, part int32) (bool, replicaState) {
	st := replicaState{leader: cluster.NoLeader, hw: -1, leo: [3]batch.Offset{-1, -1, -1}}
	if len(c.live()) != 3 {
		st.err = errors.New("a node is down")
		return false, st
	}
	pm := c.meta(0, topic, part)
	st.leader, st.epoch, st.isr = pm.Leader, pm.LeaderEpoch, pm.ISR
	for i := range 3 {
		if p := c.broker(i).partition(topic, part); p != nil {
			st.leo[i] = p.log().EndOffset()
		}
		other := c.meta(i, topic, part)
		if other.Leader != pm.Leader || other.LeaderEpoch != pm.LeaderEpoch || !slices.Equal(other.ISR, pm.ISR) {
			st.err = fmt.Errorf("node %d's metadata differs: %+v", i, other)
			return false, st
		}
	}
	if pm.Leader == cluster.NoLeader {
		return false, st
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st.hw, st.err = c.highWatermark(ctx, int(pm.Leader), topic, part)
	if st.err != nil || pm.Reassigning() || len(pm.ISR) != len(pm.Replicas) {
		return false, st
	}
	for _, id := range pm.Replicas {
		if st.leo[id] != st.hw {
			return false, st
		}
	}
	return true, st
}

// settle waits up to d for every partition of topic to settle, failing with each one's state.
func (c *rcluster) settle(topic string, partitions int32, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		var not []string
		for part := range partitions {
			if ok, st := c.settled(topic, part); !ok {
				not = append(not, fmt.Sprintf("%s-%d: %v", topic, part, st))
			}
		}
		if len(not) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not settled within %v (want: all nodes up, no move, every replica in the ISR, every replica's log end == the leader's high watermark):\n%s", d, strings.Join(not, "\n"))
		}
		time.Sleep(50 * time.Millisecond) // polling, bounded by the deadline
	}
}

// readBatches reads every whole batch of node i's replica of topic-part in [start, upTo). It is
// brokertest.LogBatches, which package broker's own tests cannot import (brokertest imports
// broker).
func (c *rcluster) readBatches(i int, topic string, part int32, upTo batch.Offset) ([]batch.Batch, error) {
	p := c.broker(i).partition(topic, part)
	if p == nil {
		return nil, fmt.Errorf("node %d hosts no %s-%d", i, topic, part)
	}
	l := p.log()
	var out []batch.Batch
	for off := l.StartOffset(); off < upTo; {
		s, err := l.Read(off, 1<<20, upTo)
		if err != nil {
			return out, fmt.Errorf("node %d %s-%d read at %d: %w", i, topic, part, off, err)
		}
		buf, err := s.AppendTo(nil)
		s.Release()
		if err != nil {
			return out, fmt.Errorf("node %d %s-%d read at %d: %w", i, topic, part, off, err)
		}
		if len(buf) == 0 {
			return out, fmt.Errorf("node %d %s-%d: nothing at %d below %d", i, topic, part, off, upTo)
		}
		next := off
		for rest := buf; len(rest) > 0; {
			b, r, err := batch.Next(rest)
			if err != nil {
				break // a partial batch at the end: read again from it
			}
			if err := b.Validate(); err != nil {
				return out, fmt.Errorf("node %d %s-%d batch at %d: %w", i, topic, part, b.BaseOffset(), err)
			}
			out = append(out, b)
			next = b.NextOffset()
			rest = r
		}
		if next == off {
			return out, fmt.Errorf("node %d %s-%d: no whole batch at %d", i, topic, part, off)
		}
		off = next
	}
	return out, nil
}

// checkIdentical compares every replica of topic-part batch by batch up to hw: the same
// offsets, leader epochs, CRCs and bytes. It returns the leader's batches.
func (c *rcluster) checkIdentical(topic string, part int32, leader int32, hw batch.Offset) []batch.Batch {
	c.t.Helper()
	want, err := c.readBatches(int(leader), topic, part, hw)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, id := range c.meta(int(leader), topic, part).Replicas {
		i := int(id)
		if id == leader {
			continue
		}
		got, err := c.readBatches(i, topic, part, hw)
		if err != nil {
			c.t.Fatal(err)
		}
		for k := range max(len(got), len(want)) {
			if k >= len(got) || k >= len(want) {
				c.t.Fatalf("%s-%d: node %d has %d batches below the high watermark %d, the leader %d has %d", topic, part, i, len(got), hw, leader, len(want))
			}
			g, w := got[k], want[k]
			if !bytes.Equal(g, w) {
				c.t.Fatalf("%s-%d batch %d differs: node %d has base %d epoch %d crc %08x (%d bytes), the leader %d has base %d epoch %d crc %08x (%d bytes)",
					topic, part, k, i, g.BaseOffset(), g.PartitionLeaderEpoch(), g.CRC(), len(g), leader, w.BaseOffset(), w.PartitionLeaderEpoch(), w.CRC(), len(w))
			}
		}
	}
	return want
}

// logRecords is the record values of batches by offset.
func logRecords(t testing.TB, bs []batch.Batch) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, b := range bs {
		it := b.Iter(batch.IterOptions{})
		var r batch.Record
		for it.Next(&r) {
			out[int64(r.Offset)] = string(r.Value)
		}
		if err := it.Err(); err != nil {
			t.Fatalf("batch at %d: %v", b.BaseOffset(), err)
		}
	}
	return out
}

// verify settles topic and checks each partition: replicas identical up to the high watermark,
// and every record l acknowledged at the offset its ack gave. Records in forbidden (values that
// must not survive: a zombie's appends) must be in no replica. It logs the duplicates (records
// in the log more than once: resends after a lost answer, allowed without idempotence).
func (c *rcluster) verify(topic string, partitions int32, l *ledger, forbidden map[string]bool) {
	c.t.Helper()
	c.settle(topic, partitions, 20*time.Second)
	acked := l.snapshot()
	lost, dups, total := 0, 0, 0
	for part := range partitions {
		_, st := c.settled(topic, part)
		bs := c.checkIdentical(topic, part, st.leader, st.hw)
		recs := logRecords(c.t, bs)
		total += len(recs)
		seen := map[string]int{}
		for _, v := range recs {
			seen[v]++
			if forbidden[v] {
				c.t.Errorf("%s-%d: %q, which must have been truncated (%v), is below the high watermark %d", topic, part, v, st, st.hw)
			}
		}
		for _, n := range seen {
			if n > 1 {
				dups += n - 1
			}
		}
		for v, a := range acked {
			if a.partition != part {
				continue
			}
			if got, ok := recs[a.offset]; !ok || got != v {
				lost++
				if lost <= 10 {
					c.t.Errorf("acknowledged record %q (%s-%d offset %d) lost: the log has %q there (%v)", v, topic, part, a.offset, got, st)
				}
			}
		}
	}
	c.t.Logf("%s: %d records in the logs, %d acknowledged (%d sends failed), %d duplicates, %d acknowledged lost", topic, total, len(acked), l.failures(), dups, lost)
	if lost > 0 {
		c.t.Fatalf("%d acknowledged records lost", lost)
	}
}

// dumpLogs writes the tail of every node's log into the test's output.
func (c *rcluster) dumpLogs() {
	for i, lb := range c.logs {
		c.t.Logf("node %d log tail:\n%s", i, lb.tail(60))
	}
}

// tailBuffer keeps the last max bytes written to it (a broker's log, for a failing test).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max/2:]...)
	}
	return len(p), nil
}

// tail is the last n lines.
func (b *tailBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(b.buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ack is where an acknowledged record is.
type ack struct {
	partition int32
	offset    int64
}

// ledger is what a producer was told: the records acknowledged, by value, and the sends that
// failed (which may or may not be in the log).
type ledger struct {
	mu     sync.Mutex
	acked  map[string]ack
	failed int
	errs   map[string]int // failure messages, counted, for the log
}

func (l *ledger) snapshot() map[string]ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.acked)
}

func (l *ledger) failures() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// count is the number of records acknowledged so far.
func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// producer is an acks=all producer with retries over the cluster's Net (as producerNode),
// sending unique values round-robin over a topic's partitions until stopped.
type producer struct {
	l    *ledger
	stop chan struct{}
	done chan struct{}
}

// startProducer starts sending tag-<n> values to topic's partitions, at most 32 unanswered.
func (c *rcluster) startProducer(topic string, partitions int32, tag string) *producer {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	p, err := client.NewProducer(ctx, client.ProducerConfig{
		Config: client.Config{Brokers: c.bootstrap(), Dial: c.net.Dialer(producerNode), RequestTimeout: 2 * time.Second,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MetadataMaxAge: time.Second},
		Acks: client.AcksAll, DeliveryTimeout: 15 * time.Second, Linger: time.Millisecond, MaxInFlight: 1, MaxBlock: 5 * time.Second,
		RetryBackoff: 50 * time.Millisecond, RetryBackoffMax: 300 * time.Millisecond,
	})
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	pr := &producer{l: &ledger{acked: map[string]ack{}, errs: map[string]int{}}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		defer cancel()
		sem := make(chan struct{}, 32)
		var wg sync.WaitGroup
	loop:
		for i := 0; ; i++ {
			select {
			case <-pr.stop:
				break loop
			case <-ctx.Done():
				break loop
			case sem <- struct{}{}:
			}
			v := fmt.Sprintf("%s-%06d", tag, i)
			part := int32(i) % partitions
			wg.Add(1)
			p.Send(ctx, &client.Record{Topic: topic, Partition: part, PartitionSet: true, Value: []byte(v)}, func(md client.RecordMetadata, err error) {
				defer wg.Done()
				defer func() { <-sem }()
				pr.l.mu.Lock()
				defer pr.l.mu.Unlock()
				if err != nil {
					pr.l.failed++
					pr.l.errs[err.Error()]++
					return
				}
				pr.l.acked[v] = ack{partition: md.Partition, offset: md.Offset}
			})
		}
		_ = p.Flush(ctx)
		wg.Wait()
		_ = p.Close(context.Background())
	}()
	c.t.Cleanup(pr.finish)
	return pr
}

// finish stops the producer and waits for every send's answer. Idempotent.
func (p *producer) finish() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// waitAcks waits until the producer has n more acknowledgements than it had at the call.
func (c *rcluster) waitAcks(p *producer, n int, d time.Duration, what string) {
	c.t.Helper()
	from := p.l.count()
	waitFor(c.t, d, fmt.Sprintf("%d more acknowledgements (%s; %d so far, %d failed)", n, what, p.l.count(), p.l.failures()), func() bool {
		return p.l.count() >= from+n
	})
}
