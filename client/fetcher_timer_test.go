package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/net/wire"
)

// A fetcher's request timer (one per connection, armed per request) that fires about when the
// long poll's empty answer arrives (request.timeout.ms 2 ms on top of fetch.max.wait.ms), racing
// with seeks made between polls: every seek lands (the first record polled is the seek's
// offset), nothing hangs, and after Close no fetcher timer is armed nor any request context
// alive. (From the review of the per-connection request context.)
func TestFetcherTimerRacesSeeks(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		name := "default"
		if reuse {
			name = "reuse"
		}
		t.Run(name, func(t *testing.T) {
			b := brokertest.Start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			conn, err := Dial(ctx, b.Addr().String(), "timer-seek")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			topic := "timer-seek-" + name
			var cr wire.CreateTopicsResponse
			if err := conn.Call(ctx, &wire.CreateTopicsRequest{TimeoutMs: 10000, Topics: []wire.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: 1, ReplicationFactor: -1}}}, &cr); err != nil || cr.Topics[0].ErrorCode != wire.NoError {
				t.Fatal(err, cr.Topics)
			}
			const n = 50
			for i := range n {
				bl := batch.NewBuilder(batch.DefaultBuilderOptions())
				bl.Append(&batch.Record{Timestamp: 1, Value: []byte{byte(i)}})
				bt, err := bl.Build()
				if err != nil {
					t.Fatal(err)
				}
				var pr wire.ProduceResponse
				if err := conn.Call(ctx, &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: bt}}}}}, &pr); err != nil {
					t.Fatal(err)
				}
			}
			var failed atomic.Int64
			cfg := ConsumerConfig{
				Config: Config{Brokers: []string{"unix://" + b.UnixAddr().String()}, RequestTimeout: 2 * time.Millisecond,
					Logger: FetchFailureLogger(&failed)},
				FetchMaxWait:       15 * time.Millisecond,
				RetryBackoff:       time.Millisecond,
				AutoOffsetReset:    OffsetResetEarliest,
				ReuseRecordBuffers: reuse,
			}
			// The 2 ms also bounds the bootstrap metadata request, which a loaded machine
			// (CI, -race) can take longer to answer: retry the construction, which is not
			// what this test is about, rather than widen the timeout the test is about.
			var c *Consumer
			for attempt := 1; ; attempt++ {
				if c, err = NewConsumer(ctx, cfg); err == nil {
					break
				}
				if !errors.Is(err, context.DeadlineExceeded) || attempt == 100 {
					t.Fatalf("attempt %d: %v", attempt, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			tp := TopicPartition{Topic: topic}
			if err := c.Assign([]TopicPartition{tp}); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			deadline := time.Now().Add(1500 * time.Millisecond)
			seeks := 0
			for time.Now().Before(deadline) {
				// Park the fetcher at the end of the log for a while (long polls whose answer
				// races the timer), then seek back into it.
				if err := c.Seek(tp, n); err != nil {
					t.Fatal(err)
				}
				pctx, pcancel := context.WithTimeout(ctx, time.Duration(rng.IntN(40))*time.Millisecond)
				_, _ = c.Poll(pctx)
				pcancel()
				want := int64(rng.IntN(n))
				if err := c.Seek(tp, want); err != nil {
					t.Fatal(err)
				}
				// Every fetch has 2 ms beyond its long poll before its timer fires: a loaded
				// machine may miss that many times in a row before one gets through, and each
				// miss costs a new connection. The Poll only has to come back with the seek's
				// records at last.
				pctx, pcancel = context.WithTimeout(ctx, 30*time.Second)
				recs, err := c.Poll(pctx)
				pcancel()
				if err != nil {
					t.Fatalf("seek %d to %d: Poll: %v", seeks, want, err)
				}
				if len(recs) == 0 || recs[0].Offset != want {
					t.Fatalf("seek %d to %d: first record %+v", seeks, want, recs)
				}
				seeks++
			}
			t.Logf("%d seeks, %d fetch failures logged", seeks, failed.Load())
			if err := c.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			for id, f := range c.mu.fetchers {
				if f.reqTimer != nil && f.reqTimer.Stop() {
					t.Errorf("fetcher %d: request timer still armed after Close", id)
				}
				if f.reqCtx != nil && f.reqCtx.Err() == nil {
					t.Errorf("fetcher %d: request context alive after Close", id)
				}
				if f.cancel != nil {
					t.Errorf("fetcher %d: cancel still set after Close", id)
				}
			}
		})
	}
}
