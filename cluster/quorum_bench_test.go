package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkControllerFailover measures, with the default timings for a real network, the time
// from closing the active controller of three (its connections drop, as at kill -9) until a
// survivor commits a metadata change (a CreateTopic retried through the failover). Reported as
// failover-ms per iteration; the goal is ≤ 2 s.
func BenchmarkControllerFailover(b *testing.B) {
	var total time.Duration
	for i := range b.N {
		b.StopTimer()
		tc, lns := newTestCluster(b, 3)
		tc.tweak = func(c *Config) {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 0, 0, 0 // the defaults
			c.Dial = nil
		}
		tc.start(lns)
		l := tc.leader()
		f := tc.follower()
		registerAll(b, tc.node(f), tc.voters)
		b.StartTimer()
		t0 := time.Now()
		tc.kill(l)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := tc.node(f).CreateTopic(ctx, TopicSpec{Name: fmt.Sprintf("after-%d", i), NumPartitions: 1, ReplicationFactor: 1})
		cancel()
		d := time.Since(t0)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		total += d
		b.Logf("failover %d: %v", i, d.Round(time.Millisecond))
		for _, id := range tc.running() {
			_ = tc.node(id).Close()
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "failover-ms")
}
