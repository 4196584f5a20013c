package client

// Tests of the producer's backoff (KIP-580): batch retries, metadata refreshes and the lookups
// of a topic Send waits for wait retry.backoff.ms doubled per failure up to
// retry.backoff.max.ms. They run against a fake broker (response_fuzz_test.go) that refuses
// what the test wants refused and notes when each request came. The checks on the gaps are
// lower bounds only (a timer never fires early, so a gap is at least its backoff whatever the
// machine's load), and upper bounds on counts derived from those lower bounds: a gap's lower
// bound from the second on is above what a fixed backoff could give, so they tell a doubling
// backoff from a fixed one without comparing gaps with each other.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

const retryTopic = "retry"

// retryBroker is a fake broker that leads retryTopic's one partition (or says it has no
// leader), answers Produce with refuse's error code while it returns one, and notes when
// each Metadata and Produce request came. Its metadata names two brokers, 1 and 2, both at
// its own listener, so that the leader can move from one to the other.
type retryBroker struct {
	*fakeBroker

	// Guarded by the fake broker's handler lock (locked).
	leader   int32                      // of partition 0 (node 1 or 2, both this listener); -1: none
	epoch    int32                      // partition 0's leader epoch
	refuse   func(n int) wire.ErrorCode // the answer to the n-th Produce (from 0)
	metadata []time.Time
	produces []time.Time
	next     int64 // the offset the next accepted batch gets
}

func startRetryBroker(t *testing.T, leader int32, refuse func(n int) wire.ErrorCode) *retryBroker {
	rb := &retryBroker{leader: leader, refuse: refuse}
	rb.fakeBroker = startFakeBroker(t, t.TempDir(), rb.handle)
	t.Cleanup(rb.close)
	return rb
}

func (rb *retryBroker) handle(h wire.RequestHeader, req wire.Request) []byte {
	switch req := req.(type) {
	case *wire.MetadataRequest:
		rb.metadata = append(rb.metadata, time.Now())
		resp := &wire.MetadataResponse{ControllerID: 1,
			Brokers: []wire.MetadataBroker{{NodeID: 1, Host: "127.0.0.1", Port: 9, UnixPath: rb.path},
				{NodeID: 2, Host: "127.0.0.1", Port: 9, UnixPath: rb.path}},
			Topics: []wire.MetadataTopic{{Topic: retryTopic, Partitions: []wire.MetadataPartition{
				{Partition: 0, Leader: rb.leader, LeaderEpoch: rb.epoch, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}}}}}
		return resp.AppendTo(nil)
	case *wire.ProduceRequest:
		code := rb.refuse(len(rb.produces))
		rb.produces = append(rb.produces, time.Now())
		resp := &wire.ProduceResponse{}
		for _, rt := range req.Topics {
			t := wire.ProduceResponseTopic{Topic: rt.Topic}
			for _, rp := range rt.Partitions {
				p := wire.ProduceResponsePartition{Partition: rp.Partition, ErrorCode: code, BaseOffset: -1, LogAppendTimeMs: -1}
				if code == wire.NoError {
					p.BaseOffset = rb.next
					rb.next++ // the tests send one record per batch
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp.AppendTo(nil)
	default:
		rb.t.Errorf("fake broker: unexpected %v request", h.APIKey)
		return nil
	}
}

// times returns a copy of the arrival times of the Metadata and Produce requests so far.
func (rb *retryBroker) times() (metadata, produces []time.Time) {
	rb.locked(func() {
		metadata = append([]time.Time(nil), rb.metadata...)
		produces = append([]time.Time(nil), rb.produces...)
	})
	return metadata, produces
}

// waitFor polls (it does not sleep a fixed time) until cond holds for the broker's request
// times, and returns them; it fails the test after a minute.
func (rb *retryBroker) waitFor(t *testing.T, what string, cond func(metadata, produces []time.Time) bool) (metadata, produces []time.Time) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		metadata, produces = rb.times()
		if cond(metadata, produces) {
			return metadata, produces
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute, still no %s: %d Metadata and %d Produce requests", what, len(metadata), len(produces))
		}
	}
}

func newRetryProducer(t *testing.T, rb *retryBroker, cfg ProducerConfig) *Producer {
	t.Helper()
	cfg.Config = Config{Brokers: []string{rb.addr()}, SharedMemoryBytes: -1, Logger: fzDiscardLogger()}
	return newClosedAtEndProducer(t, cfg)
}

// minBackoff is the shortest wait retryBackoff may give after failures failures in a row:
// the doubled base, capped, less its 20 % jitter.
func minBackoff(base, ceiling time.Duration, failures int) time.Duration {
	return retryBackoff(base, ceiling, failures, 0)
}

// maxTries bounds how many tries, the first at once and each next one at least
// minBackoff(failures so far) after the last, fit in window.
func maxTries(base, ceiling, window time.Duration) int {
	n, spent := 1, time.Duration(0)
	for {
		spent += minBackoff(base, ceiling, n)
		if spent > window {
			return n
		}
		n++
	}
}

// checkGaps checks that the k-th gap between tries (from 1) is at least minBackoff(k): the
// waits doubled, not stayed at base. It returns the gaps.
func checkGaps(t *testing.T, what string, tries []time.Time, base, ceiling time.Duration) []time.Duration {
	t.Helper()
	gaps := make([]time.Duration, len(tries)-1)
	for k := range gaps {
		gaps[k] = tries[k+1].Sub(tries[k])
	}
	for k, g := range gaps {
		if lo := minBackoff(base, ceiling, k+1); g < lo {
			t.Errorf("%s: gap %d is %v, want at least %v (retry.backoff.ms %v doubled per failure, less 20 %%); gaps %v",
				what, k+1, g, lo, base, gaps)
		}
	}
	return gaps
}

// A batch the broker keeps refusing with a retriable error (KAFKA_STORAGE_ERROR: its disk is
// full) is retried after waits that double, and delivered once the broker takes it. So is one
// refused with NOT_LEADER_OR_FOLLOWER while the metadata keeps naming the same leader and
// leader epoch: the refreshes each refusal asks for bring nothing that ends the backoff.
func TestProducerRetryBackoffGrows(t *testing.T) {
	for _, code := range []wire.ErrorCode{wire.ErrKafkaStorageError, wire.ErrNotLeaderOrFollower} {
		t.Run(code.Name(), func(t *testing.T) {
			const refusals = 5
			rb := startRetryBroker(t, 1, func(n int) wire.ErrorCode {
				if n < refusals {
					return code
				}
				return wire.NoError
			})
			const base, ceiling = 50 * time.Millisecond, 5 * time.Second
			p := newRetryProducer(t, rb, ProducerConfig{Linger: -1, RetryBackoff: base, RetryBackoffMax: ceiling, DeliveryTimeout: time.Minute})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			md, err := p.SendSync(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("v")})
			if err != nil || md.Offset != 0 {
				t.Fatalf("SendSync: offset %d, %v; want it delivered at offset 0 after %d refusals", md.Offset, err, refusals)
			}
			_, produces := rb.times()
			if len(produces) != refusals+1 {
				t.Fatalf("%d Produce requests, want %d refused and the one accepted", len(produces), refusals)
			}
			// Each gap at least its doubled backoff less the jitter: the 2nd is already longer
			// than a fixed backoff's longest (1.6 against 1.2 times retry.backoff.ms).
			gaps := checkGaps(t, "batch retries", produces, base, ceiling)
			t.Logf("gaps between attempts: %v", gaps)
		})
	}
}

// Against a broker that refuses every batch, a batch is tried only as often as the growing
// waits allow within delivery.timeout.ms (at most 22 times here; with a fixed 10 ms it was 115),
// then fails with ErrDeliveryTimeout and the broker's error.
func TestProducerRetriesWithinDeliveryTimeoutAreBounded(t *testing.T) {
	rb := startRetryBroker(t, 1, func(int) wire.ErrorCode { return wire.ErrKafkaStorageError })
	const base, ceiling, timeout = 10 * time.Millisecond, 100 * time.Millisecond, 1500 * time.Millisecond
	p := newRetryProducer(t, rb, ProducerConfig{Linger: -1, RetryBackoff: base, RetryBackoffMax: ceiling, DeliveryTimeout: timeout})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.SendSync(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("v")})
	if !errors.Is(err, ErrDeliveryTimeout) || !errors.Is(err, wire.ErrKafkaStorageError) {
		t.Fatalf("SendSync: %v, want ErrDeliveryTimeout with KAFKA_STORAGE_ERROR", err)
	}
	_, produces := rb.times()
	if limit := maxTries(base, ceiling, timeout); len(produces) < 2 || len(produces) > limit {
		t.Fatalf("%d Produce requests within delivery.timeout.ms %v, want 2 to %d (retry.backoff.ms %v doubled up to %v)",
			len(produces), timeout, limit, base, ceiling)
	}
	checkGaps(t, "batch retries", produces, base, ceiling)
	t.Logf("%d Produce requests in delivery.timeout.ms %v", len(produces), timeout)
}

// A negative RetryBackoffMax keeps the backoff fixed at RetryBackoff, and one below
// RetryBackoff counts as RetryBackoff.
func TestProducerRetryBackoffMaxDefaults(t *testing.T) {
	for _, tc := range []struct {
		name               string
		backoff, backoffMx time.Duration
		wantBackoff        time.Duration
		wantMax            time.Duration
	}{
		{"defaults", 0, 0, 100 * time.Millisecond, time.Second},
		{"negative max: fixed backoff", 0, -1, 100 * time.Millisecond, 100 * time.Millisecond},
		{"max below backoff", 300 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond},
		{"set", 20 * time.Millisecond, 3 * time.Second, 20 * time.Millisecond, 3 * time.Second},
		{"no backoff", -1, 0, 0, time.Second},
	} {
		cfg, err := ProducerConfig{RetryBackoff: tc.backoff, RetryBackoffMax: tc.backoffMx}.withDefaults()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cfg.RetryBackoff != tc.wantBackoff || cfg.RetryBackoffMax != tc.wantMax {
			t.Errorf("%s: RetryBackoff %v, RetryBackoffMax %v; want %v, %v", tc.name, cfg.RetryBackoff, cfg.RetryBackoffMax, tc.wantBackoff, tc.wantMax)
		}
		if d := cfg.retryDelay(1_000_000, 0.999); d > tc.wantMax*12/10 {
			t.Errorf("%s: a million failures wait %v, want at most %v", tc.name, d, tc.wantMax*12/10)
		}
	}
}

// While a partition has no leader, the producer refreshes the metadata to find one, at waits
// that double (a fixed retry.backoff.ms made ten Metadata requests a second until its batches
// expired); once a leader appears, the batch goes to it.
func TestProducerMetadataRefreshesBackOff(t *testing.T) {
	rb := startRetryBroker(t, -1, func(int) wire.ErrorCode { return wire.NoError })
	const base, ceiling = 20 * time.Millisecond, time.Second
	p := newRetryProducer(t, rb, ProducerConfig{Linger: -1, RetryBackoff: base, RetryBackoffMax: ceiling, DeliveryTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	result := make(chan error, 1)
	p.Send(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("v")}, func(_ RecordMetadata, err error) { result <- err })
	// The first request is NewProducer's; then the housekeeper's, looking for the leader.
	const refreshes = 7
	metadata, _ := rb.waitFor(t, "metadata refreshes", func(m, _ []time.Time) bool { return len(m) >= 1+refreshes })
	gaps := checkGaps(t, "metadata refreshes", metadata[1:1+refreshes], base, ceiling)
	t.Logf("gaps between refreshes: %v", gaps)
	rb.locked(func() { rb.leader = 1 })
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("the record, once its partition had a leader: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the record was not delivered once its partition had a leader")
	}
}

// Send to a topic that is not in the metadata looks it up until max.block.ms, at waits that
// double: a few lookups, not one per retry.backoff.ms.
func TestProducerUnknownTopicLookupsBackOff(t *testing.T) {
	rb := startRetryBroker(t, 1, func(int) wire.ErrorCode { return wire.NoError })
	const base, ceiling, block = 10 * time.Millisecond, 200 * time.Millisecond, 2 * time.Second
	p := newRetryProducer(t, rb, ProducerConfig{Linger: -1, RetryBackoff: base, RetryBackoffMax: ceiling, MaxBlock: block})
	before, _ := rb.times()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.SendSync(ctx, &Record{Topic: "missing", Value: []byte("v")}); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("SendSync to a topic never created: %v, want ErrUnknownTopic", err)
	}
	metadata, _ := rb.times()
	lookups := metadata[len(before):]
	// The last wait is cut short by max.block.ms, and one more lookup follows it.
	if limit := maxTries(base, ceiling, block) + 1; len(lookups) < 2 || len(lookups) > limit {
		t.Fatalf("%d lookups within max.block.ms %v, want 2 to %d (retry.backoff.ms %v doubled up to %v)",
			len(lookups), block, limit, base, ceiling)
	}
	checkGaps(t, "topic lookups", lookups[:len(lookups)-1], base, ceiling)
	t.Logf("%d lookups in max.block.ms %v", len(lookups), block)
}

// The housekeeper's refresh schedule, step by step on a made-up clock (jitter 0.5: each wait
// exactly its doubled base): the gap doubles after each refresh that brings nothing new, up to
// retry.backoff.max.ms; a refresh that finds a leader moved, or one after a quiet spell of
// twice retry.backoff.max.ms, starts over at retry.backoff.ms.
func TestRefreshSchedule(t *testing.T) {
	const base, ceiling = 100 * time.Millisecond, time.Second
	t0 := time.Unix(1000, 0)
	r := newRefreshSchedule(&ProducerConfig{RetryBackoff: base, RetryBackoffMax: ceiling}, t0)
	if r.next() != t0.Add(base) {
		t.Fatalf("first refresh at %v, want retry.backoff.ms after the start", r.next().Sub(t0))
	}
	now := t0
	for i, step := range []struct {
		name    string
		after   time.Duration // from the earliest time the refresh may start
		news    bool
		wantGap time.Duration
	}{
		{"nothing new", 0, false, base},
		{"nothing new twice", 0, false, 2 * base},
		{"three times", 0, false, 4 * base},
		{"four times", 0, false, 8 * base},
		{"five times: capped", 0, false, ceiling},
		{"six times: capped", 0, false, ceiling},
		{"a leader moved", 0, true, base},
		{"nothing new after the news", 0, false, base},
		{"nothing new again", 0, false, 2 * base},
		{"once more", 0, false, 4 * base},
		{"late, but within twice the ceiling", 2*ceiling - 4*base - time.Millisecond, false, 8 * base},
		{"after a quiet spell", 2*ceiling - 8*base, false, base},
		{"and again", 0, false, 2 * base},
	} {
		start := r.next().Add(step.after)
		if start.Before(now) {
			t.Fatalf("step %d (%s): the test's clock goes back", i, step.name)
		}
		now = start.Add(3 * time.Millisecond) // the refresh takes a while; gaps count from its end
		r.refreshed(start, now, step.news, 0.5)
		if got := r.next().Sub(now); got != step.wantGap {
			t.Errorf("step %d (%s): next refresh %v after the last, want %v", i, step.name, got, step.wantGap)
		}
	}
}

// A refresh brings news (and restarts the refresh backoff) when a topic the producer writes
// to has a partition with another leader or leader epoch, another partition count, or came
// or went; not when only other topics changed.
func TestLeadersMoved(t *testing.T) {
	p := &Producer{}
	p.topics.Store(&map[string]*accTopic{"mine": {name: "mine"}})
	md := func(edit func(map[string]TopicMetadata)) *metadata {
		topics := map[string]TopicMetadata{}
		for _, name := range []string{"mine", "other"} {
			topics[name] = TopicMetadata{Name: name, Partitions: []PartitionMetadata{
				{Partition: 0, Leader: 1, LeaderEpoch: 3}, {Partition: 1, Leader: -1, LeaderEpoch: 2}}}
		}
		if edit != nil {
			edit(topics)
		}
		return &metadata{topics: topics}
	}
	part := func(topic string, i int, f func(*PartitionMetadata)) func(map[string]TopicMetadata) {
		return func(m map[string]TopicMetadata) {
			tm := m[topic]
			tm.Partitions = append([]PartitionMetadata(nil), tm.Partitions...)
			f(&tm.Partitions[i])
			m[topic] = tm
		}
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]TopicMetadata)
		want bool
	}{
		{"the same", nil, false},
		{"a leader appeared", part("mine", 1, func(p *PartitionMetadata) { p.Leader = 2 }), true},
		{"a leader moved", part("mine", 0, func(p *PartitionMetadata) { p.Leader, p.LeaderEpoch = 2, 4 }), true},
		{"a new leader epoch", part("mine", 0, func(p *PartitionMetadata) { p.LeaderEpoch = 4 }), true},
		{"only the ISR changed", part("mine", 0, func(p *PartitionMetadata) { p.ISR = []int32{1, 2} }), false},
		{"another topic's leader moved", part("other", 0, func(p *PartitionMetadata) { p.Leader = 2 }), false},
		{"more partitions", func(m map[string]TopicMetadata) {
			tm := m["mine"]
			tm.Partitions = append(tm.Partitions, PartitionMetadata{Partition: 2, Leader: 1})
			m["mine"] = tm
		}, true},
		{"the topic is gone", func(m map[string]TopicMetadata) { delete(m, "mine") }, true},
	} {
		if got := p.leadersMoved(md(nil), md(tc.edit)); got != tc.want {
			t.Errorf("%s: leadersMoved %v, want %v", tc.name, got, tc.want)
		}
		if got := p.leadersMoved(md(tc.edit), md(nil)); got != tc.want {
			t.Errorf("%s, the other way: leadersMoved %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A batch backing off after a failure goes to its partition's new leader at once, not when
// its backoff ends, once the metadata shows the leader moved since the failure (another
// broker, or the same one with a newer leader epoch), as Kafka's producer does since 3.7
// (KIP-951): a backoff grown to retry.backoff.max.ms would otherwise add up to that much to
// every failover, after the refresh that found the new leader. Here the backoff is ten
// minutes, and so is the wait before the housekeeper's first refresh: the test refreshes
// itself, as the housekeeper would, once the batch is back in its queue.
func TestProducerRetryGoesToMovedLeaderAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		move func(rb *retryBroker) // called under the handler's lock
	}{
		{"another broker", func(rb *retryBroker) { rb.leader, rb.epoch = 2, 1 }},
		{"a newer leader epoch", func(rb *retryBroker) { rb.epoch = 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var moved *retryBroker // set before the producer exists
			rb := startRetryBroker(t, 1, func(n int) wire.ErrorCode {
				if n == 0 {
					tc.move(moved) // the leader moves as it refuses the batch
					return wire.ErrNotLeaderOrFollower
				}
				return wire.NoError
			})
			rb.locked(func() { moved = rb })
			const backoff = 10 * time.Minute
			p := newRetryProducer(t, rb, ProducerConfig{Linger: -1, RetryBackoff: backoff, RetryBackoffMax: backoff, DeliveryTimeout: time.Hour})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			result := make(chan error, 1)
			p.Send(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("v")}, func(_ RecordMetadata, err error) { result <- err })

			// The refused batch is back in its partition's queue, backing off.
			ap := (*(*p.topics.Load())[retryTopic].parts.Load())[0]
			for {
				ap.mu.Lock()
				requeued := len(ap.mu.ready) == 1 && ap.mu.ready[0].attempts == 1
				ap.mu.Unlock()
				if requeued {
					break
				}
				if ctx.Err() != nil {
					t.Fatal("the refused batch never came back to its queue")
				}
				time.Sleep(time.Millisecond)
			}
			if news, _ := p.refreshMetadata(p.client.meta.Load()); !news {
				t.Fatal("the refresh after the leader moved brought no news")
			}
			select {
			case err := <-result:
				if err != nil {
					t.Fatalf("the record, once its leader moved: %v", err)
				}
			case <-ctx.Done():
				t.Fatalf("the batch was not sent to the new leader within a minute: it waits out its backoff of %v", backoff)
			}
			if _, produces := rb.times(); len(produces) != 2 {
				t.Fatalf("%d Produce requests, want the refused one and the one to the new leader", len(produces))
			}
		})
	}
}

// A refresh brings news when the leaders moved since the caller's previous refresh, even if
// another path (here the client's own refresh, as Send's lookup of a topic makes one) stored
// the moved leaders first: else the housekeeper's run of refreshes that found nothing would go
// on growing its gaps while the leaders it waits for had moved.
func TestProducerRefreshNewsSinceItsLastRefresh(t *testing.T) {
	rb := startRetryBroker(t, 1, func(int) wire.ErrorCode { return wire.NoError })
	p := newRetryProducer(t, rb, ProducerConfig{Linger: -1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.SendSync(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("v")}); err != nil {
		t.Fatal(err) // the producer writes to the topic: its leaders count
	}
	news, seen := p.refreshMetadata(p.client.meta.Load())
	if news {
		t.Fatal("a refresh that found the same leader brought news")
	}
	rb.locked(func() { rb.leader, rb.epoch = 2, 1 })
	if err := p.client.RefreshMetadata(ctx); err != nil { // another path stores the move
		t.Fatal(err)
	}
	if news, _ := p.refreshMetadata(seen); !news {
		t.Fatal("the leader moved since the last refresh, and the refresh brought no news: another path had stored the move first")
	}
	if news, _ := p.refreshMetadata(p.client.meta.Load()); news {
		t.Fatal("a refresh after the move was seen brought news again")
	}
}

// When a backing-off batch's leader counts as moved (accBatch.leaderMoved): a newer leader
// epoch; another broker only where an epoch is unknown, so that brokers whose metadata name
// each other at one epoch do not make a batch bounce between them without a backoff; never
// while the partition has no leader or is not in the metadata.
func TestBatchLeaderMoved(t *testing.T) {
	md := func(leader, epoch int32) *metadata {
		return &metadata{topics: map[string]TopicMetadata{"t": {Name: "t", Partitions: []PartitionMetadata{
			{Partition: 0, Leader: 3, LeaderEpoch: 9}, {Partition: 1, Leader: leader, LeaderEpoch: epoch}}}}}
	}
	b := &accBatch{part: &accPartition{topic: &accTopic{name: "t"}, partition: 1}}
	for _, tc := range []struct {
		name                      string
		failedLeader, failedEpoch int32
		md                        *metadata
		want                      bool
	}{
		{"the same leader and epoch", 1, 5, md(1, 5), false},
		{"a newer epoch, the same broker", 1, 5, md(1, 6), true},
		{"a newer epoch, another broker", 1, 5, md(2, 6), true},
		{"another broker at the same epoch", 1, 5, md(2, 5), false},
		{"an older epoch (a lagging broker's metadata)", 1, 5, md(2, 4), false},
		{"no leader", 1, 5, md(-1, 6), false},
		{"epoch unknown at the failure, another broker", 1, -1, md(2, 5), true},
		{"epoch unknown at the failure, the same broker", 1, -1, md(1, 5), false},
		{"epoch unknown now, another broker", 1, 5, md(2, -1), true},
		{"partition not in the metadata", 1, 5, &metadata{topics: map[string]TopicMetadata{}}, false},
	} {
		b.failedLeader, b.failedEpoch = tc.failedLeader, tc.failedEpoch
		if got := b.leaderMoved(tc.md); got != tc.want {
			t.Errorf("%s: leaderMoved %v, want %v", tc.name, got, tc.want)
		}
	}
}

// levelCounter is a slog.Handler that counts the records of one message by level.
type levelCounter struct {
	msg string
	mu  sync.Mutex
	n   map[slog.Level]int
}

func (h *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Message == h.msg {
		h.n[r.Level]++
	}
	return nil
}
func (h *levelCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *levelCounter) WithGroup(string) slog.Handler      { return h }

// A producer whose batches keep failing says so once (a warning), not once per retry, and not
// only when the records time out: a broker that went away fails every batch, again and again.
func TestProducerWarnsOnceWhileRetrying(t *testing.T) {
	const refusals = 6
	rb := startRetryBroker(t, 1, func(n int) wire.ErrorCode {
		if n < refusals {
			return wire.ErrKafkaStorageError
		}
		return wire.NoError
	})
	logs := &levelCounter{msg: "sluice producer: produce failed, retrying", n: map[slog.Level]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := NewProducer(ctx, ProducerConfig{
		Config: Config{Brokers: []string{rb.addr()}, SharedMemoryBytes: -1, Logger: slog.New(logs)},
		Linger: -1, RetryBackoff: time.Millisecond, RetryBackoffMax: 4 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if _, err := p.SendSync(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("v")}); err != nil {
		t.Fatalf("SendSync after %d refusals: %v", refusals, err)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if logs.n[slog.LevelWarn] != 1 || logs.n[slog.LevelDebug] != refusals-1 {
		t.Fatalf("retry logs by level %v, want one warning and %d debug records for %d refusals", logs.n, refusals-1, refusals)
	}
}
