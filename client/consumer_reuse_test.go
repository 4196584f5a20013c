package client_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
)

// Tests of ConsumerConfig.ReuseRecordBuffers: records valid until the next Poll, fetch
// responses and decompressed batches in reused buffers.

// Every record comes back exactly, Poll after Poll, when compressed and uncompressed batches
// alternate in each partition, partitions share fetch responses, a Poll ends inside a batch
// and spans several, and fetches are small enough that the buffers go round many times. Each
// Poll's records are checked before the next Poll, which is as long as they are valid; under
// -race, a buffer reused too early is also a reported data race.
func TestConsumerReuseRoundTrip(t *testing.T) {
	f := newConsumerFixture(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	codecs := []batch.Codec{batch.None, batch.Zstd, batch.None, batch.LZ4, batch.Gzip, batch.None, batch.Snappy, batch.None}
	const partitions = 3
	for _, tr := range []struct{ name, addr string }{{"tcp", f.tcp()}, {"unix", f.unix()}} {
		t.Run(tr.name, func(t *testing.T) {
			topic := "reuse-rt-" + tr.name
			f.createTopic(topic, partitions)
			want := map[client.TopicPartition][]batch.Record{}
			total := 0
			for p := range int32(partitions) {
				tp := client.TopicPartition{Topic: topic, Partition: p}
				for b, codec := range codecs {
					recs := consumerRoundTripRecords(p, b, 4+(int(p)*5+b*3)%11, base)
					f.produce(topic, p, codec, recs)
					want[tp] = append(want[tp], recs...)
					total += len(recs)
				}
			}
			c := f.consumer(client.ConsumerConfig{
				Config:          client.Config{Brokers: []string{tr.addr}},
				AutoOffsetReset: client.OffsetResetEarliest, ReuseRecordBuffers: true,
				MaxPollRecords: 7, MaxPartitionFetchBytes: 1500,
			})
			tps, err := c.PartitionsFor(f.ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Assign(tps); err != nil {
				t.Fatal(err)
			}
			next := map[client.TopicPartition]int64{}
			polls := 0
			for got := 0; got < total; {
				recs, err := c.Poll(f.ctx)
				if err != nil {
					t.Fatalf("poll after %d of %d records: %v", got, total, err)
				}
				polls++
				for _, r := range recs {
					tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
					off := next[tp]
					if off >= int64(len(want[tp])) {
						t.Fatalf("%s: record at %d past the end", tp, r.Offset)
					}
					checkConsumedRecord(t, r, tp, off, want[tp][off])
					next[tp]++
				}
				got += len(recs)
			}
			if polls < total/7 {
				t.Fatalf("%d records in %d polls: MaxPollRecords not applied", total, polls)
			}
			f.pollNone(c, 50*time.Millisecond)
		})
	}
}

// The lifetime rule, both ways. With ReuseRecordBuffers every value of a Poll stays intact
// until the next Poll, even when that Poll ended one response and started the next (which
// sends the next fetch) and once the next response has arrived; and a later Poll's value takes
// the place in memory of one of the first Poll's (its buffer is reused, for a fetch response
// or a decompressed batch). By default every value has memory of its own. (The test compares
// addresses, not the first value's bytes: reading a value after the next Poll is a data race
// with the consumer, by design.)
func TestConsumerRecordLifetime(t *testing.T) {
	f := newConsumerFixture(t)
	for _, mode := range consumerModes {
		for _, codec := range []batch.Codec{batch.None, batch.Zstd} {
			t.Run(mode.name+"/"+codec.String(), func(t *testing.T) {
				topic := "lifetime-" + mode.name + "-" + codec.String()
				f.createTopic(topic, 1)
				tp := client.TopicPartition{Topic: topic}
				const batches, perBatch, perPoll = 8, 20, 15
				f.produceSameLength(topic, codec, batches, perBatch)
				// One batch per fetch; Polls end inside batches.
				c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetEarliest, ReuseRecordBuffers: mode.reuse,
					MaxPartitionFetchBytes: 1, MaxPollRecords: perPoll}, tp)
				var firstAt *byte
				var held []client.Record // the latest Poll's records
				var want [][]byte        // and copies of their values
				reusedBy := 0            // the Poll whose value took the place of one of the first Poll's
				for n, poll := 0, 1; n < batches*perBatch; poll++ {
					// The response after the one Poll is in: the next batch, or the one after.
					if next := n/perBatch + min(n%perBatch, 1); poll > 1 && next < batches {
						waitPrefetched(t, f, c)
					}
					for i, r := range held {
						if !bytes.Equal(r.Value, want[i]) {
							t.Fatalf("Poll %d's value at offset %d changed to %q before the next Poll, want %q", poll-1, r.Offset, r.Value, want[i])
						}
					}
					recs, err := c.Poll(f.ctx)
					if err != nil || len(recs) == 0 || recs[0].Offset != int64(n) {
						t.Fatalf("Poll %d: %d records, %v", poll, len(recs), err)
					}
					held, want = recs, want[:0]
					for _, r := range recs {
						if w := fmt.Sprintf("batch-%02d-record-%02d", r.Offset/perBatch, r.Offset%perBatch); string(r.Value) != w {
							t.Fatalf("Poll %d: value %q, want %q", poll, r.Value, w)
						}
						want = append(want, bytes.Clone(r.Value))
						switch {
						case poll == 1 && r.Offset == 3:
							firstAt = &r.Value[0]
						case reusedBy == 0 && &r.Value[0] == firstAt:
							reusedBy = poll
						}
					}
					n += len(recs)
				}
				switch {
				case mode.reuse && reusedBy == 0:
					t.Fatal("no value took the place of the first Poll's: buffers are not reused")
				case !mode.reuse && reusedBy != 0:
					t.Fatalf("default mode: Poll %d returned a value in the memory of the first Poll's", reusedBy)
				}
				if mode.reuse {
					t.Logf("Poll %d's value is where the first Poll's was", reusedBy)
				}
			})
		}
	}
}

// waitPrefetched waits until the consumer holds its next response (the prefetch).
func waitPrefetched(t *testing.T, f *consumerFixture, c *client.Consumer) {
	t.Helper()
	for {
		if responses, _ := c.QueuedForTest(); responses > 0 {
			return
		}
		if f.ctx.Err() != nil {
			t.Fatal("the next response was not prefetched")
		}
		time.Sleep(time.Millisecond)
	}
}

// With ReuseRecordBuffers, Poll allocates nothing in steady state, whatever the records hold
// (headers, compressed batches); by default it allocates at least the []Record it returns,
// plus a buffer per compressed batch and per fetch response. Allocations count every
// goroutine: the fetcher's and the in-process broker's are in the figures.
func TestConsumerReuseAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	f := newConsumerFixture(t)
	const batches, perBatch = 200, 10
	f.createTopic("allocs", 1)
	tp := client.TopicPartition{Topic: "allocs"}
	for b := range batches {
		recs := make([]batch.Record, perBatch)
		for i := range recs {
			recs[i] = batch.Record{Timestamp: 1, Key: []byte("key"), Value: bytes.Repeat([]byte{byte(i)}, 100),
				Headers: []batch.Header{{Key: []byte("trace"), Value: []byte("abc")}, {Key: []byte("type"), Value: []byte("x")}}}
		}
		f.produce("allocs", 0, []batch.Codec{batch.None, batch.Zstd}[b%2], recs)
	}
	perPoll := map[string]float64{}
	for _, mode := range consumerModes {
		c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetEarliest, ReuseRecordBuffers: mode.reuse, MaxPollRecords: perBatch}, tp)
		poll := func() {
			if recs, err := c.Poll(f.ctx); err != nil || len(recs) != perBatch {
				t.Fatalf("Poll: %d records, %v", len(recs), err)
			}
		}
		for range 10 {
			poll() // warm up: buffers, decompressors, header keys
		}
		perPoll[mode.name] = allocsPerRun(150, poll)
	}
	t.Logf("allocations per Poll of %d records: %v", perBatch, perPoll)
	if got := perPoll["reuse"]; got > 0.5 {
		t.Errorf("reuse: %.2f allocations per Poll, want none", got)
	}
	if got := perPoll["default"]; got < 1 {
		t.Errorf("default: %.2f allocations per Poll, want at least the []Record", got)
	}
}

// allocsPerRun is testing.AllocsPerRun without its rounding down to a whole number.
func allocsPerRun(runs int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs)
}

// Close while a fetch is out, parked on the broker or with a response in transit, stops the
// consumer promptly in both modes; a Poll in progress returns ErrConsumerClosed.
func TestConsumerCloseDuringFetch(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("close-fetch", 1)
	tp := client.TopicPartition{Topic: "close-fetch"}
	big := make([]batch.Record, 64)
	for i := range big {
		big[i] = batch.Record{Timestamp: 1, Value: bytes.Repeat([]byte{byte(i)}, 8<<10)}
	}
	for range 8 { // 4 MiB: responses take a while to read
		f.produce("close-fetch", 0, batch.None, big)
	}
	for _, mode := range consumerModes {
		t.Run(mode.name+"/parked", func(t *testing.T) {
			c := f.consumer(client.ConsumerConfig{ReuseRecordBuffers: mode.reuse, FetchMaxWait: 10 * time.Second}, tp) // latest: nothing to fetch
			f.pollNone(c, 50*time.Millisecond)                                                                         // the fetch is out, parked for 10 s
			closeWhilePolling(t, f, c, 0)
		})
		t.Run(mode.name+"/in transit", func(t *testing.T) {
			c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetEarliest, ReuseRecordBuffers: mode.reuse, MaxPollRecords: 16}, tp)
			closeWhilePolling(t, f, c, 2)
		})
	}
}

// closeWhilePolling polls in the background, closes c once polls Polls have returned
// records, and checks that Close and the Poll in progress return in time.
func closeWhilePolling(t *testing.T, f *consumerFixture, c *client.Consumer, polls int) {
	t.Helper()
	returned := make(chan struct{}, 1)
	done := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			recs, err := c.Poll(f.ctx)
			if err != nil {
				done <- err
				return
			}
			for _, r := range recs { // read every byte, as an application would
				_ = bytes.Count(r.Value, []byte{0})
			}
			returned <- struct{}{}
		}
	}()
	for range polls {
		<-returned
	}
	go func() { // let the poller run on to Close
		for range returned {
		}
	}()
	start := time.Now()
	if err := c.Close(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, client.ErrConsumerClosed) {
		t.Fatalf("Poll during Close: %v", err)
	}
	wg.Wait()
	close(returned)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v", d)
	}
}
