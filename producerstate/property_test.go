package producerstate

import (
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/batch"
)

// TestRetriesLandOnce is the window's property: a producer with at most Window batches
// unacknowledged, whose requests the network loses, duplicates (a retry while the first copy
// is still on its way), and delivers in any order, and whose answers it loses, ends with each
// batch in the log exactly once and in its order, whatever the interleaving.
func TestRetriesLandOnce(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		simulate(t, seed, 40)
	}
}

func simulate(t *testing.T, seed uint64, nBatches int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	const pid, epoch = 11, 0
	sizes, firsts := randomBatches(rng, nBatches)
	s := New()
	var log []int // batch indexes in the order the broker appended them
	var end batch.Offset
	var network []int // copies of requests on their way, by batch index
	acked := make([]bool, nBatches)
	firstUnacked, next := 0, 0
	for step := 0; firstUnacked < nBatches; step++ {
		if step > 200000 {
			t.Fatalf("seed %d: no progress after %d steps (acked up to %d)", seed, step, firstUnacked)
		}
		switch r := rng.IntN(10); {
		case r < 3 && next < nBatches && next-firstUnacked < Window:
			network = append(network, next) // a new batch: at most Window unacknowledged
			next++
		case r < 5 && firstUnacked < next:
			// A retry of any unacknowledged batch that was sent: its answer is lost or late.
			i := firstUnacked + rng.IntN(next-firstUnacked)
			if !acked[i] {
				network = append(network, i)
			}
		case r < 9 && len(network) > 0:
			k := rng.IntN(len(network)) // any order
			i := network[k]
			network = append(network[:k], network[k+1:]...)
			if rng.IntN(5) == 0 {
				continue // the request is lost
			}
			b := BatchInfo{ProducerID: pid, ProducerEpoch: epoch, FirstSeq: firsts[i], LastSeq: firsts[i] + sizes[i] - 1,
				FirstOffset: end, LastOffset: end + batch.Offset(sizes[i]) - 1}
			v, err := s.Check([]BatchInfo{b})
			ok := err == nil
			if ok && !v.Duplicate {
				s.Update(b)
				log = append(log, i)
				end = b.LastOffset + 1
			}
			if ok && v.Duplicate && v.FirstOffset != offsetOf(sizes, log, i) {
				t.Fatalf("seed %d: duplicate of batch %d answered offset %d, it is at %d", seed, i, v.FirstOffset, offsetOf(sizes, log, i))
			}
			if ok && rng.IntN(4) != 0 { // else the answer is lost
				acked[i] = true
			}
		}
		for firstUnacked < nBatches && acked[firstUnacked] {
			firstUnacked++
		}
	}
	if len(log) != nBatches {
		t.Fatalf("seed %d: the log has %d batches, want %d: %v", seed, len(log), nBatches, log)
	}
	for k, i := range log {
		if i != k {
			t.Fatalf("seed %d: the log's batch %d is batch %d: %v", seed, k, i, log)
		}
	}
}

// randomBatches returns the record counts (1-4) of n batches and their first sequences.
func randomBatches(rng *rand.Rand, n int) (sizes, firsts []int32) {
	sizes, firsts = make([]int32, n), make([]int32, n)
	seq := int32(0)
	for i := range sizes {
		sizes[i] = 1 + rng.Int32N(4)
		firsts[i] = seq
		seq += sizes[i]
	}
	return sizes, firsts
}

// offsetOf is where batch i is in the log, -1 if it is not there.
func offsetOf(sizes []int32, log []int, i int) batch.Offset {
	var off batch.Offset
	for _, j := range log {
		if j == i {
			return off
		}
		off += batch.Offset(sizes[j])
	}
	return -1
}

// TestRequestsOfSeveralBatchesLandOnce is the same property for a producer whose requests
// carry up to 4 batches each (one append), as Sluice's client sends them: at most Window
// requests from the one that first carried the oldest unacknowledged batch, a retry only of
// that batch and alone, and the network losing, duplicating and reordering them: each batch
// once, in order.
func TestRequestsOfSeveralBatchesLandOnce(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		simulateRequests(t, seed, 60)
	}
}

func simulateRequests(t *testing.T, seed uint64, nBatches int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	const pid = 12
	sizes, firsts := randomBatches(rng, nBatches)
	s := New()
	var log []int
	var end batch.Offset
	type request struct{ from, to int } // batches [from, to)
	var network []request
	acked := make([]bool, nBatches)
	reqOf := make([]int, nBatches) // the request that first carried each batch
	requests, firstUnacked, next := 0, 0, 0
	for step := 0; firstUnacked < nBatches; step++ {
		if step > 400000 {
			t.Fatalf("seed %d: no progress (acked up to %d)", seed, firstUnacked)
		}
		switch r := rng.IntN(10); {
		case r < 3 && next < nBatches && (firstUnacked == next || requests-reqOf[firstUnacked] < Window):
			n := min(1+rng.IntN(4), nBatches-next)
			for i := next; i < next+n; i++ {
				reqOf[i] = requests
			}
			network = append(network, request{next, next + n})
			requests++
			next += n
		case r < 5 && firstUnacked < next:
			// A retry, as the client makes them: the first unacknowledged batch, alone (its
			// answer lost or late, or its request refused: a gap before a later batch).
			network = append(network, request{firstUnacked, firstUnacked + 1})
		case r < 9 && len(network) > 0:
			k := rng.IntN(len(network))
			req := network[k]
			network = append(network[:k], network[k+1:]...)
			if rng.IntN(5) == 0 {
				continue // lost
			}
			var bs []BatchInfo
			off := end
			for i := req.from; i < req.to; i++ {
				bs = append(bs, BatchInfo{ProducerID: pid, FirstSeq: firsts[i], LastSeq: firsts[i] + sizes[i] - 1,
					FirstOffset: off, LastOffset: off + batch.Offset(sizes[i]) - 1})
				off += batch.Offset(sizes[i])
			}
			v, err := s.Check(bs)
			if err != nil {
				continue // out of order, or a duplicate among several: retried alone
			}
			if v.Duplicate {
				if v.FirstOffset != offsetOf(sizes, log, req.from) {
					t.Fatalf("seed %d: duplicate of batch %d answered offset %d, it is at %d", seed, req.from, v.FirstOffset, offsetOf(sizes, log, req.from))
				}
			} else {
				for i, b := range bs {
					s.Update(b)
					log = append(log, req.from+i)
				}
				end = off
			}
			if rng.IntN(4) != 0 {
				for i := req.from; i < req.to; i++ {
					acked[i] = true
				}
			}
		}
		for firstUnacked < nBatches && acked[firstUnacked] {
			firstUnacked++
		}
	}
	for k, i := range log {
		if i != k {
			t.Fatalf("seed %d: the log's batch %d is batch %d: %v", seed, k, i, log)
		}
	}
	if len(log) != nBatches {
		t.Fatalf("seed %d: the log has %d batches, want %d", seed, len(log), nBatches)
	}
}
