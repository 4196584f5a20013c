package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// Fetches are pooled (fetch.go): a fetch's request, response and parking are reused by the
// next one. Many connections mix immediate fetches, parked fetches that an append wakes or
// maxWait ends, requests of different shapes (one partition, several topics, an unknown
// partition) and connections dropped with a fetch parked, while producers append: every
// response has its own request's shape, and records from the offset it asked for, and nothing
// stays parked. Run with -race, it also checks that a recycled fetch is not touched by its
// previous holders.
func TestPooledFetchesKeepTheirOwnState(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	admin := dial(t, b.Addr().String())
	topics := map[string]int32{"one": 1, "three": 3}
	for name, n := range topics {
		createTopic(t, admin, name, n)
	}
	// Each record's value names its partition and offset, so a response from the wrong
	// partition or offset shows.
	var mu sync.Mutex
	next := map[string]int64{}  // "topic/partition" → the next offset to produce (guarded by mu)
	acked := map[string]int64{} // "topic/partition" → offsets below it are written (guarded by mu)
	key := func(topic string, part int32) string { return topic + "/" + strconv.Itoa(int(part)) }

	ctx, stop := context.WithCancel(context.Background())
	var producers sync.WaitGroup
	for name, n := range topics {
		pc := dial(t, b.Addr().String())
		producers.Add(1)
		go func() {
			defer producers.Done()
			for i := 0; ctx.Err() == nil && i < 2000; i++ {
				part := int32(i) % n
				mu.Lock()
				off := next[key(name, part)]
				next[key(name, part)] = off + 1
				mu.Unlock()
				var resp wire.ProduceResponse
				err := pc.Call(ctx, &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
					{Topic: name, Partitions: []wire.ProduceRequestPartition{{Partition: part, Records: records(t, fmt.Sprintf("%s/%d@%d", name, part, off))}}},
				}}, &resp)
				if ctx.Err() != nil {
					return
				}
				if r := resp.Topics[0].Partitions[0]; err != nil || r.ErrorCode != wire.NoError || r.BaseOffset != off {
					t.Errorf("produce %s/%d: %v %+v, want offset %d", name, part, err, r, off)
					return
				}
				mu.Lock()
				acked[key(name, part)] = off + 1
				mu.Unlock()
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond) // some records to read

	type ask struct {
		topic string
		part  int32
		off   int64
	}
	check := func(req []ask, resp *wire.FetchResponse) error {
		// The response lists the request's topics in order, each with its partitions.
		var got []ask
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				got = append(got, ask{rt.Topic, rp.Partition, -1})
			}
		}
		if len(got) != len(req) {
			return fmt.Errorf("response has %d partitions %v, the request %d %v", len(got), got, len(req), req)
		}
		i := 0
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				a := req[i]
				i++
				if rt.Topic != a.topic || rp.Partition != a.part {
					return fmt.Errorf("answer %d is %s/%d, asked %s/%d", i, rt.Topic, rp.Partition, a.topic, a.part)
				}
				if _, known := topics[a.topic]; !known || a.part >= topics[a.topic] {
					if rp.ErrorCode != wire.ErrUnknownTopicOrPartition || len(rp.Records) != 0 {
						return fmt.Errorf("%s/%d: %v with %d bytes, want UNKNOWN_TOPIC_OR_PARTITION", a.topic, a.part, rp.ErrorCode, len(rp.Records))
					}
					continue
				}
				if rp.ErrorCode != wire.NoError {
					return fmt.Errorf("%s/%d: %v", a.topic, a.part, rp.ErrorCode)
				}
				if len(rp.Records) == 0 {
					continue
				}
				bt, _, err := batch.Next(rp.Records)
				if err != nil || int64(bt.BaseOffset()) != a.off {
					return fmt.Errorf("%s/%d from %d: first batch %v", a.topic, a.part, a.off, err)
				}
				var rec batch.Record
				it := bt.Iter(batch.IterOptions{})
				want := fmt.Sprintf("%s/%d@%d", a.topic, a.part, a.off)
				if !it.Next(&rec) || string(rec.Value) != want {
					return fmt.Errorf("%s/%d from %d: first value %q (%v), want %q", a.topic, a.part, a.off, rec.Value, it.Err(), want)
				}
			}
		}
		return nil
	}

	const fetchers = 6
	var wg sync.WaitGroup
	for g := range fetchers {
		c := dial(t, b.Addr().String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := 0; i < 150 && !t.Failed(); i++ {
				// Pick the shape: a known partition, or three partitions of one topic and
				// one of the other, or an unknown partition among known ones.
				var req []ask
				n := 1 + rng.IntN(3)
				for range n {
					name := "one"
					if rng.IntN(2) == 0 {
						name = "three"
					}
					part := rng.Int32N(topics[name])
					if rng.IntN(10) == 0 {
						part = topics[name] + 1 // unknown
					}
					mu.Lock()
					end := acked[key(name, part)]
					mu.Unlock()
					off := end // at the end (or just below it): parks until an append or maxWait
					if end > 0 && rng.IntN(3) > 0 {
						off = rng.Int64N(end)
					}
					req = append(req, ask{name, part, off})
				}
				fr := &wire.FetchRequest{ReplicaID: -1, MaxWaitMs: int32(1 + rng.IntN(20)), MinBytes: 1, MaxBytes: 1 << 20}
				for _, a := range req {
					fr.Topics = append(fr.Topics, wire.FetchRequestTopic{Topic: a.topic, Partitions: []wire.FetchRequestPartition{
						{Partition: a.part, FetchOffset: a.off, PartitionMaxBytes: 64 << 10, CurrentLeaderEpoch: -1, LogStartOffset: -1}}})
				}
				if rng.IntN(25) == 0 {
					// A connection that goes away with its fetch parked.
					gone, err := client.Dial(context.Background(), b.Addr().String(), "test")
					if err != nil {
						t.Error(err)
						return
					}
					done := make(chan struct{})
					go func() {
						defer close(done)
						var resp wire.FetchResponse
						fr := *fr
						fr.MaxWaitMs, fr.MinBytes = 30000, 1<<30
						_ = gone.Call(context.Background(), &fr, &resp)
					}()
					time.Sleep(time.Millisecond)
					_ = gone.Close()
					<-done
					continue
				}
				var resp wire.FetchResponse
				if err := c.Call(context.Background(), fr, &resp); err != nil {
					t.Errorf("fetch: %v", err)
					return
				}
				if err := check(req, &resp); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	stop()
	producers.Wait()
	for name, n := range topics {
		for part := range n {
			waitParked(t, b.partition(name, part), 0)
		}
	}
}
