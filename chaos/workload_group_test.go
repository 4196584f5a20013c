package chaos

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/client"
)

// TestGroupShortPolls: consumers that poll with a short timeout (Kafka's
// poll(Duration.ofSeconds(1)), a common loop) through a rebalance that lasts longer than the
// timeout. Two consumers share four partitions; one crashes hard (its connections cut, so it
// cannot leave); a third joins, and the rebalance waits for the crashed member's session (6 s)
// to expire. The join must outlive the polls (Kafka's consumer keeps its JoinGroup in flight
// across them): every partition is owned by a live consumer within the session timeout plus
// 4 s of the crash. (Before the client ran joins on a goroutine of its own, a Poll that ended
// abandoned the join, and the partitions stayed unowned 12 s and more.)
func TestGroupShortPolls(t *testing.T) {
	testGroupPolls(t, time.Second)
}

func testGroupPolls(t *testing.T, pollFor time.Duration) {
	_, _, bootstrap, _ := testCluster(t, func(c *broker.Config) { c.GroupInitialRebalanceDelay = -1 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := Workload{Topics: 1, Partitions: 4, Writers: 1, Rate: 10, Readers: 1}.WithDefaults(3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := CreateTopics(ctx, bootstrap, w); err != nil {
		t.Fatal(err)
	}
	type polled struct {
		c    *client.Consumer
		dial *severable
		stop context.CancelFunc
		done chan struct{}
	}
	start := func(name string) *polled {
		p := &polled{dial: &severable{}, done: make(chan struct{})}
		off, fileReads := false, false
		c, err := client.NewConsumer(ctx, client.ConsumerConfig{
			Config:  client.Config{Brokers: bootstrap, Dial: p.dial.dial, ClientID: name},
			GroupID: "short-polls", EnableAutoCommit: &off, AutoOffsetReset: client.OffsetResetEarliest,
			SessionTimeout: groupSessionTimeout, HeartbeatInterval: groupHeartbeat, MaxPollInterval: groupMaxPollInterval,
			Assignors: []string{"cooperative-sticky"}, FileReads: &fileReads,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe(w.TopicNames()...); err != nil {
			t.Fatal(err)
		}
		p.c = c
		pctx, stop := context.WithCancel(ctx)
		p.stop = stop
		go func() {
			defer close(p.done)
			for pctx.Err() == nil {
				one, cancel := context.WithTimeout(pctx, pollFor)
				_, err := c.Poll(one)
				cancel()
				if errors.Is(err, client.ErrConsumerClosed) {
					return
				}
			}
		}()
		t.Cleanup(func() { stop(); <-p.done; _ = c.Close(context.Background()) })
		return p
	}
	owned := func(ps ...*polled) int {
		var all []client.TopicPartition
		for _, p := range ps {
			all = append(all, p.c.Assignment()...)
		}
		slices.SortFunc(all, func(a, b client.TopicPartition) int { return compareTP(TopicPartition(a), TopicPartition(b)) })
		return len(slices.Compact(all))
	}
	waitOwned := func(within time.Duration, ps ...*polled) time.Duration {
		t.Helper()
		begin := time.Now()
		for owned(ps...) < w.Partitions {
			if time.Since(begin) > within {
				t.Fatalf("after %v, %d of %d partitions owned", within, owned(ps...), w.Partitions)
			}
			time.Sleep(50 * time.Millisecond) // polling, bounded by within
		}
		return time.Since(begin)
	}
	a, b := start("a"), start("b")
	waitOwned(30*time.Second, a, b)
	for len(a.c.Assignment()) == 0 || len(b.c.Assignment()) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the two consumers never shared the partitions")
		}
		time.Sleep(50 * time.Millisecond) // polling, bounded by ctx
	}
	// b crashes hard: its polls stop, its connections are cut.
	b.stop()
	<-b.done
	b.dial.sever()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = b.c.Close(context.Background()) }()
	crash := time.Now()
	c := start("c")
	took := waitOwned(groupSessionTimeout+4*time.Second, a, c)
	t.Logf("every partition owned again %v after the crash (%v of waiting)", time.Since(crash), took)
	wg.Wait()
}
