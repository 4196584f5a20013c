package client_test

// The consumer with responses fetched ahead (responsesAhead): damaged batches, seeks and
// record lifetimes while the prefetch is full.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
)

// aheadWaitQueued waits until at least n responses are queued, or d has passed.
func aheadWaitQueued(c *client.Consumer, n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		r, _ := c.QueuedForTest()
		if r >= n || time.Now().After(deadline) {
			return r
		}
		time.Sleep(time.Millisecond)
	}
}

// A damaged batch whose responses after it are already queued (one batch per response, two
// ahead): Poll returns the records before it, then the error, never a record after it.
// damage: "crc" flips a value bit (found by Poll), "magic" breaks the magic byte (found by
// the fetcher's wholeBatches).
func TestConsumerAheadDamagedBatch(t *testing.T) {
	for _, damage := range []struct {
		name  string
		apply func([]byte, int)
		// fetcherSees: the fetcher finds the damage itself (a batch's magic or length) and
		// fetches no further; a CRC mismatch only Poll finds.
		fetcherSees bool
		fetchBytes  int // max.partition.fetch.bytes: 1 for a batch per response, 0 for all
	}{
		{"crc", flipValueBit, false, 1},
		{"magic", breakMagic, true, 1},
		{"magic/one-response", breakMagic, true, 0}, // intact batches and the damaged one arrive together
	} {
		t.Run(damage.name, func(t *testing.T) {
			f := damagedLogFixture(t, "dmg", [][]string{
				{"intact-0", "intact-1", "intact-2"},
				{"intact-3", "intact-4", "intact-5"},
				{"damaged-6", "victim-record-7", "damaged-8"},
				{"after-9", "after-10"},
				{"after-11", "after-12"},
			}, "victim-record-7", damage.apply)
			ctx := f.ctx
			for _, mode := range consumerModes {
				t.Run(mode.name, func(t *testing.T) {
					c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetEarliest,
						ReuseRecordBuffers: mode.reuse, MaxPartitionFetchBytes: damage.fetchBytes, MaxPollRecords: 2},
						client.TopicPartition{Topic: "dmg"})
					var got []string
					var perr error
					for poll := 0; ; poll++ {
						if poll > 0 {
							aheadWaitQueued(c, client.ResponsesAhead, 300*time.Millisecond)
						}
						recs, err := c.Poll(ctx)
						for _, r := range recs {
							got = append(got, string(r.Value))
						}
						if err != nil {
							perr = err
							break
						}
					}
					want := []string{"intact-0", "intact-1", "intact-2", "intact-3", "intact-4", "intact-5"}
					if !slices.Equal(got, want) {
						t.Fatalf("got %q (then %v), want %q", got, perr, want)
					}
					for range 2 {
						if recs, err := c.Poll(ctx); len(recs) != 0 || err == nil {
							t.Fatalf("Poll after the error: %d records, %v", len(recs), err)
						}
					}
					if damage.fetcherSees {
						time.Sleep(50 * time.Millisecond) // time for a fetch that should not happen
						if responses, _ := c.QueuedForTest(); responses != 0 {
							t.Fatalf("%d responses fetched past the damaged batch after the error", responses)
						}
					}
					// A seek past the damage resumes: the error is the partition's until then.
					if err := c.Seek(client.TopicPartition{Topic: "dmg"}, 9); err != nil {
						t.Fatal(err)
					}
					var after []string
					for len(after) < 4 {
						recs, err := c.Poll(ctx)
						if err != nil {
							t.Fatalf("Poll after seeking past the damaged batch: %v (after %q)", err, after)
						}
						for _, r := range recs {
							after = append(after, string(r.Value))
						}
					}
					if want := []string{"after-9", "after-10", "after-11", "after-12"}; !slices.Equal(after, want) {
						t.Fatalf("after the seek: %q, want %q", after, want)
					}
				})
			}
		})
	}
}

// Random polls (MaxPollRecords 3, one or two batches per response) and seeks on three
// partitions: every Poll returns, per partition, exactly the records from the position on,
// in order, with the right values; a partition is never left unfetched.
func TestConsumerAheadSeekAndPoll(t *testing.T) {
	f := newConsumerFixture(t)
	const parts, batches, perBatch = 3, 12, 5
	const n = batches * perBatch
	for _, mode := range consumerModes {
		t.Run(mode.name, func(t *testing.T) {
			topic := "stress-" + mode.name
			f.createTopic(topic, parts)
			for p := range int32(parts) {
				for b := range batches {
					vals := make([]string, perBatch)
					for i := range vals {
						vals[i] = fmt.Sprintf("p%d-o%d", p, b*perBatch+i)
					}
					f.produceValues(topic, p, vals...)
				}
			}
			c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetEarliest, ReuseRecordBuffers: mode.reuse,
				MaxPartitionFetchBytes: 200, MaxPollRecords: 3})
			tps, _ := c.PartitionsFor(f.ctx, topic)
			if err := c.Assign(tps); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(mode.name))))
			next := map[int32]int64{0: 0, 1: 0, 2: 0}
			for i := 0; i < 400; i++ {
				switch rng.IntN(8) {
				case 0:
					p := int32(rng.IntN(parts))
					off := int64(rng.IntN(n))
					if err := c.Seek(client.TopicPartition{Topic: topic, Partition: p}, off); err != nil {
						t.Fatal(err)
					}
					next[p] = off
				case 1:
					time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond) // let fetches catch up
				}
				done := true
				for _, o := range next {
					done = done && o >= n
				}
				if done {
					for p := range int32(parts) {
						_ = c.Seek(client.TopicPartition{Topic: topic, Partition: p}, 0)
						next[p] = 0
					}
				}
				recs, err := c.Poll(f.ctx)
				if err != nil {
					t.Fatalf("Poll %d: %v", i, err)
				}
				for _, r := range recs {
					if r.Offset != next[r.Partition] {
						t.Fatalf("Poll %d: partition %d offset %d, want %d", i, r.Partition, r.Offset, next[r.Partition])
					}
					if w := fmt.Sprintf("p%d-o%d", r.Partition, r.Offset); string(r.Value) != w {
						t.Fatalf("Poll %d: value %q, want %q", i, r.Value, w)
					}
					next[r.Partition]++
				}
				if _, buffered := c.QueuedForTest(); buffered > client.ResponsesAhead || buffered < 0 {
					t.Fatalf("buffered %d", buffered)
				}
			}
			// Nothing is stuck: every partition reads on to its end, then new records.
			for p := range int32(parts) {
				_ = c.Seek(client.TopicPartition{Topic: topic, Partition: p}, n-7)
			}
			got := f.pollN(c, parts*7)
			if len(got) != parts*7 {
				t.Fatalf("tail: %d", len(got))
			}
			for p := range int32(parts) {
				f.produceValues(topic, p, "new")
			}
			if got := f.pollN(c, parts); len(got) != parts {
				t.Fatalf("new: %d", len(got))
			}
			if _, buffered := c.QueuedForTest(); buffered != 0 {
				// Not an error by itself (a long poll may have landed), just report.
				t.Logf("buffered at end: %d", buffered)
			}
		})
	}
}

// The lifetime rule with the prefetch full: before every Poll, wait until ResponsesAhead
// responses are queued (every buffer is in use), then check the previous Poll's values.
// Under -race, a fetch into a buffer the held records alias is a reported race.
func TestConsumerAheadRecordLifetime(t *testing.T) {
	f := newConsumerFixture(t)
	for _, codec := range []batch.Codec{batch.None, batch.Zstd} {
		t.Run(codec.String(), func(t *testing.T) {
			topic := "lt2-" + codec.String()
			f.createTopic(topic, 1)
			const batches, perBatch, perPoll = 12, 20, 15
			f.produceSameLength(topic, codec, batches, perBatch)
			c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetEarliest, ReuseRecordBuffers: true,
				MaxPartitionFetchBytes: 1, MaxPollRecords: perPoll}, client.TopicPartition{Topic: topic})
			var held []client.Record
			var want [][]byte
			for n := 0; n < batches*perBatch; {
				if n > 0 {
					remaining := batches - (n+perBatch-1)/perBatch
					aheadWaitQueued(c, min(client.ResponsesAhead, remaining), 2*time.Second)
					time.Sleep(2 * time.Millisecond)
				}
				for i, r := range held {
					if !bytes.Equal(r.Value, want[i]) {
						t.Fatalf("value at offset %d changed to %q before the next Poll, want %q", r.Offset, r.Value, want[i])
					}
				}
				recs, err := c.Poll(f.ctx)
				if err != nil || len(recs) == 0 || recs[0].Offset != int64(n) {
					t.Fatalf("Poll at %d: %d records, %v", n, len(recs), err)
				}
				held, want = recs, want[:0]
				for _, r := range recs {
					if w := fmt.Sprintf("batch-%02d-record-%02d", r.Offset/perBatch, r.Offset%perBatch); string(r.Value) != w {
						t.Fatalf("value %q, want %q", r.Value, w)
					}
					want = append(want, bytes.Clone(r.Value))
				}
				n += len(recs)
			}
		})
	}
}
