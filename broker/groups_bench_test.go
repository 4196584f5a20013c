package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// BenchmarkGroupCommitRF3 measures synchronous offset commits to a group's coordinator in a
// three-broker cluster: __consumer_offsets has three replicas, and a commit is answered once
// every in-sync replica has it (acks=all). Each op is one commit of one partition's offset;
// committers commit one after another each, as CommitSync does. It reports the commits per
// second and the latency percentiles. Every link goes through the in-process fault network
// (faultnet), which adds a copy per hop.
func BenchmarkGroupCommitRF3(b *testing.B) {
	for _, committers := range []int{1, 8} {
		b.Run(fmt.Sprintf("committers=%d", committers), func(b *testing.B) {
			rc := newRCluster(b, func(c *Config) { c.OffsetsTopicPartitions = 1 })
			rc.createTopic("t", 1, nil)
			const g = "bench-commits"
			k := rc.coordinatorOf(g, -1)
			conns := make([]*client.Conn, committers)
			for i := range conns {
				conns[i] = rc.sideConn(int(k))
			}
			waitFor(b, 20*time.Second, "the coordinator", func() bool {
				var resp wire.OffsetFetchResponse
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				err := conns[0].Call(ctx, &wire.OffsetFetchRequest{GroupID: g, Topics: []wire.OffsetFetchRequestTopic{}}, &resp)
				return err == nil && resp.ErrorCode == wire.NoError
			})
			lat := make([][]time.Duration, committers)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range committers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += committers {
						t0 := time.Now()
						var resp wire.OffsetCommitResponse
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						err := conns[w].Call(ctx, &wire.OffsetCommitRequest{GroupID: g, GenerationID: -1, Topics: []wire.OffsetCommitRequestTopic{
							{Topic: "t", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: int64(i), LeaderEpoch: -1}}},
						}}, &resp)
						cancel()
						if err != nil || resp.Topics[0].Partitions[0].ErrorCode != wire.NoError {
							b.Errorf("commit %d: %v %v", i, err, resp.Topics)
							return
						}
						lat[w] = append(lat[w], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) == 0 {
				return
			}
			pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "commits/s")
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
		})
	}
}
