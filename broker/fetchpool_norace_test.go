//go:build !race

// (sync.Pool drops Puts at random under -race, which breaks the accumulation this shows.)

package broker

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// A pooled fetch keeps at most maxPooledFetchPartitions of request and response capacity. The
// request's decode replaces a slice that must grow while the response keeps its old elements,
// so requests with one more topic each time, the last one large, once made a pooled fetch keep
// 107,002 response partitions (about 6 MiB) when only the request's capacity was counted.
func TestPooledFetchStaysBounded(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))  // one P: the same pooled fetch serves every request
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // a GC empties the pool
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	const steps, total = 200, 600 // each request: k-1 one-partition topics + one of total-k+1 partitions
	for k := 1; k <= steps; k++ {
		fr := &wire.FetchRequest{ReplicaID: -1, MaxWaitMs: 0, MinBytes: 1, MaxBytes: 1 << 20}
		for i := 0; i < k-1; i++ {
			fr.Topics = append(fr.Topics, wire.FetchRequestTopic{Topic: "nx", Partitions: []wire.FetchRequestPartition{{Partition: 0}}})
		}
		last := wire.FetchRequestTopic{Topic: "nx"}
		for p := 0; p < total-k+1; p++ {
			last.Partitions = append(last.Partitions, wire.FetchRequestPartition{Partition: int32(p)})
		}
		fr.Topics = append(fr.Topics, last)
		var resp wire.FetchResponse
		call(t, c, fr, &resp)
		if n := resp.NumPartitions(); n != total {
			t.Fatalf("step %d: %d partitions in response, want %d", k, n, total)
		}
	}
	time.Sleep(50 * time.Millisecond) // the last response's hook runs after the client has it
	maxKept := 0
	for range 64 {
		f := fetchPool.Get().(*fetch)
		n := 0
		for _, rt := range f.resp.Topics[:cap(f.resp.Topics)] {
			n += cap(rt.Partitions)
		}
		maxKept = max(maxKept, n)
	}
	t.Logf("largest pooled fetch keeps %d response partitions (%d KiB of FetchResponsePartition)", maxKept, maxKept*56/1024)
	if maxKept > maxPooledFetchPartitions {
		t.Errorf("a pooled fetch keeps %d response partitions, above maxPooledFetchPartitions = %d", maxKept, maxPooledFetchPartitions)
	}
}
