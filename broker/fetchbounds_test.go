package broker

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// A fetch response never says log start > high watermark, even when an append and a retention
// pass that empties the log (its start moving up to the new log end) come between its reads
// of the two: it reads the start first, so the high watermark it reads after is at least that.
func TestFetchBoundsReadStartFirst(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.RetentionCheck = time.Hour // the test runs the pass itself, between the two reads
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	other := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1, wire.ConfigEntry{Name: "retention.bytes", Value: strPtr("0")})
	if res := produce(t, c, "t", 0, wire.AcksLeader, records(t, "a")); res.ErrorCode != wire.NoError {
		t.Fatal(res.ErrorCode)
	}
	p := b.partition("t", 0)

	more := records(t, "b")
	hookDone := make(chan error, 1)
	hook := func() {
		b.hooks.Store(nil) // once
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var resp wire.ProduceResponse
		err := other.Call(ctx, &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
			{Topic: "t", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: more}}},
		}}, &resp)
		if err == nil && resp.Topics[0].Partitions[0].ErrorCode != wire.NoError {
			err = resp.Topics[0].Partitions[0].ErrorCode
		}
		if err == nil {
			// Committed (fsynced, on this single node) before retention runs, so that
			// everything is below the high watermark.
			if err = p.log().Sync(ctx); err == nil {
				b.logSynced(p, nil)
			}
		}
		b.applyRetention(p) // everything is below the high watermark: the log empties at its end
		hookDone <- err
	}
	b.hooks.Store(&testHooks{fetchBounds: hook})

	res := fetchP(t, c, "t", 0, 0, 0, 0)
	select {
	case err := <-hookDone:
		if err != nil {
			t.Fatalf("produce between the reads: %v", err)
		}
	default:
		t.Fatal("the fetch did not run the hook between its reads")
	}
	if start, end := p.log().StartOffset(), p.log().EndOffset(); start != 2 || end != 2 {
		t.Fatalf("after the append and retention the log is [%d, %d), want [2, 2)", start, end)
	}
	if res.LogStartOffset > res.HighWatermark {
		t.Fatalf("fetch response: log start %d > high watermark %d", res.LogStartOffset, res.HighWatermark)
	}
}
