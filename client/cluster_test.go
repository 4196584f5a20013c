package client

import (
	"context"
	"errors"
	"fmt"
	"github.com/sluicemq/sluice/internal/coordinator"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// staleMetadata makes every broker's Metadata answer name leaders as they were (a broker
// lagging the controller's log): only the leader hints of produce and fetch answers tell the
// client where the partitions moved.
func (c *testCluster) freezeMetadata() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = map[string][]clusterPartition{}
	for name, ps := range c.topics {
		for _, p := range ps {
			c.frozen[name] = append(c.frozen[name], clusterPartition{leader: p.leader, epoch: p.epoch})
		}
	}
}

// TestClusterProducerFollowsLeaderHint: the leader of a partition moves twice while a
// producer (acks=1, max.in.flight 5, retries) sends, and the brokers' metadata still names the
// first leader: the producer follows the NOT_LEADER_OR_FOLLOWER answers' hints to each new
// leader, and the log holds every record once, in Send order. A consumer bootstrapped at the
// first leader then follows the hint to the current one and reads them all, in order, with
// the leader moving again under it.
func TestClusterProducerFollowsLeaderHint(t *testing.T) {
	c := newTestCluster(t, 3)
	c.addTopic("t", 0)
	c.freezeMetadata()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := NewProducer(ctx, ProducerConfig{
		Config: Config{Brokers: []string{c.brokers[0].addr()}, RequestTimeout: 5 * time.Second},
		Acks:   AcksLeader, Linger: time.Millisecond, BatchSize: 256, MaxInFlight: 5,
		RetryBackoff: time.Millisecond, RetryBackoffMax: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	const n = 600
	var mu sync.Mutex
	var errs []error
	done := make(chan struct{}, n)
	received := 0
	for i := range n {
		if i == n/3 || i == 2*n/3 {
			// Mid-produce: once all but the last 50 records sent are acknowledged (those wait
			// or are in flight), the leader moves on; records sent after the last move are
			// among those acknowledged, so each leader has taken some.
			for ; received < i-50; received++ {
				<-done
			}
			c.moveLeader("t", 0, int32(3*i/n))
		}
		rec := &Record{Topic: "t", Partition: 0, PartitionSet: true, Value: []byte(strconv.Itoa(i))}
		p.Send(ctx, rec, func(_ RecordMetadata, err error) {
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			done <- struct{}{}
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for ; received < n; received++ {
		<-done
	}
	if len(errs) > 0 {
		t.Fatalf("%d sends failed, the first: %v", len(errs), errs[0])
	}
	want := make([]string, n)
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	if got := c.values("t", 0); !slices.Equal(got, want) {
		t.Fatalf("the log holds %d records, not 0..%d once each in order: %v", len(got), n-1, got)
	}
	c.mu.Lock()
	produced := maps(c.produced)
	c.mu.Unlock()
	if produced[1] == 0 || produced[2] == 0 {
		t.Fatalf("produce requests per broker %v: the producer did not follow the leader", produced)
	}

	// The consumer starts from live metadata (its offset lookups carry no hints), and meets a
	// move it can learn of only from a fetch answer's hint.
	c.mu.Lock()
	c.frozen = nil
	c.mu.Unlock()
	cons, err := NewConsumer(ctx, ConsumerConfig{Config: Config{Brokers: []string{c.brokers[0].addr()}}, AutoOffsetReset: "earliest", MaxPartitionFetchBytes: 1024,
		RetryBackoff: time.Millisecond, RetryBackoffMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	if err := cons.Assign([]TopicPartition{{"t", 0}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	moved := false
	for len(got) < n && ctx.Err() == nil {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
		if !moved && len(got) > 0 {
			c.freezeMetadata()
			c.moveLeader("t", 0, 0) // and again, under the consumer (epoch 3)
			moved = true
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %d records, not 0..%d in order: %v", len(got), n-1, got)
	}
	// The fetches ahead of Poll may have brought every record from broker 2 before the move:
	// the consumer's next fetch, at the log end, is then the one that meets the hint.
	fetchedFrom0 := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.leaderFetches[0] > 0
	}
	for deadline := time.Now().Add(10 * time.Second); !fetchedFrom0() && time.Now().Before(deadline); {
		pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		recs, err := cons.Poll(pctx)
		cancel()
		if len(recs) > 0 {
			t.Fatalf("records past the log end: %v", recs)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fetched[2] == 0 || c.leaderFetches[0] == 0 {
		t.Fatalf("fetches served per broker %v (as leader %v): the consumer did not follow the leader from 2 to 0", c.fetched, c.leaderFetches)
	}
}

func maps(m map[int32]int) map[int32]int {
	out := make(map[int32]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestClusterBootstrapList: Config.Brokers is tried in order, each until one answers: a dead
// first address (the dial refused, through Config.Dial) and a second that accepts and never
// answers are passed over for the third; with none answering, the error names every address
// and what became of it, and the silent one fails within request.timeout.ms, named.
func TestClusterBootstrapList(t *testing.T) {
	c := newTestCluster(t, 1)
	c.addTopic("t", 0)
	silent := silentListener(t)
	const dead = "127.0.0.1:1"
	var dialled []string
	var mu sync.Mutex
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, address)
		mu.Unlock()
		if address == dead {
			return nil, errors.New("link cut by the test")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{Brokers: []string{dead, silent, c.brokers[0].addr()}, Dial: dial, RequestTimeout: 300 * time.Millisecond}
	cl, err := NewClient(ctx, cfg)
	if err != nil {
		t.Fatalf("bootstrap with a live third address: %v", err)
	}
	if _, err := cl.Topic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	_ = cl.Close()
	mu.Lock()
	if len(dialled) < 3 || dialled[0] != dead || dialled[1] != silent || dialled[2] != c.brokers[0].addr() {
		t.Errorf("dialled %v, want the bootstrap list in order", dialled)
	}
	mu.Unlock()

	cfg.Brokers = []string{dead, silent}
	start := time.Now()
	_, err = NewClient(ctx, cfg)
	if !errors.Is(err, ErrNoBrokers) {
		t.Fatalf("no broker answering: %v, want ErrNoBrokers", err)
	}
	var na *NoAnswerError
	if !errors.As(err, &na) || na.Addr != silent || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not say the silent broker did not answer", err)
	}
	msg := err.Error()
	for _, want := range []string{dead, "link cut by the test", fmt.Sprintf("broker %s did not answer within 300ms", silent)} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Count(msg, "client:") > 0 {
		t.Errorf("error %q repeats the package name", msg)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("gave up after %v; each silent broker costs request.timeout.ms", took)
	}
}

// TestAdminSilentBroker: an Admin whose only broker accepts the connection and never answers
// fails within request.timeout.ms, naming the address, not after default.api.timeout.ms with a
// bare context error.
func TestAdminSilentBroker(t *testing.T) {
	silent := silentListener(t)
	_, err := NewAdminWithConfig(context.Background(), AdminConfig{Config: Config{Brokers: []string{silent}, RequestTimeout: 200 * time.Millisecond}})
	want := fmt.Sprintf("broker %s did not answer within 200ms", silent)
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewAdmin against a silent broker: %v, want %q", err, want)
	}
}

// silentListener accepts connections on a loopback port and never answers; closed (with its
// connections) when the test ends.
func silentListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		for _, nc := range conns {
			_ = nc.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestClusterCoordinatorRouting: a group's offsets go to the leader of its __consumer_offsets
// partition, abs(javaHashCode(group)) % 50 ("my-group": 12), the only broker that takes them
// (the others answer NOT_COORDINATOR); when that partition's leader moves, a commit answered
// NOT_COORDINATOR refreshes the metadata and goes to the new one.
func TestClusterCoordinatorRouting(t *testing.T) {
	c := newTestCluster(t, 3)
	leaders := make([]int32, 50)
	for i := range leaders {
		leaders[i] = int32(i % 3)
	}
	c.addTopic(offsetsTopic, leaders...)
	c.addTopic("t", 1)
	const group = "my-group"
	if p := coordinator.Partition(group, 50); p != 12 {
		t.Fatalf("partition of %q = %d, want 12 (Java's Math.abs(hashCode) %% 50)", group, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	no := false
	cons, err := NewConsumer(ctx, ConsumerConfig{Config: Config{Brokers: []string{c.brokers[2].addr()}}, GroupID: group, EnableAutoCommit: &no,
		RetryBackoff: time.Millisecond, RetryBackoffMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	tp := TopicPartition{"t", 0}
	if err := cons.CommitOffsets(ctx, map[TopicPartition]int64{tp: 7}); err != nil {
		t.Fatalf("commit to the coordinator (broker 0): %v", err)
	}
	c.moveLeader(offsetsTopic, 12, 1)
	if err := cons.CommitOffsets(ctx, map[TopicPartition]int64{tp: 9}); err != nil {
		t.Fatalf("commit after the coordinator moved: %v", err)
	}
	got, err := cons.Committed(ctx, []TopicPartition{tp})
	if err != nil || got[tp] != 9 {
		t.Fatalf("Committed = %v, %v; want 9", got, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.commits[group][tp] != 9 {
		t.Fatalf("the cluster holds %v", c.commits[group])
	}
}
