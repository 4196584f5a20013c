package producerstate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluicemq/sluice/batch"
)

// Window is how many runs of batches per producer the state remembers: a run is batches of
// the producer that follow each other in both sequence and offset, as the batches of one
// append always do (and consecutive appends with no other producer's batch between). Kafka
// remembers 5 batches, matching max.in.flight.requests.per.connection ≤ 5 with one batch per
// partition in a request; 5 runs remember at least that, and also every batch of a producer's
// last 5 requests however many batches of the partition each carried: Sluice's client packs a
// partition's waiting batches into one request, as it does without idempotence.
const Window = 5

// Errors, each mapped to Kafka's error code by the broker.
var (
	// ErrOutOfOrderSequence: OUT_OF_ORDER_SEQUENCE_NUMBER (a gap in sequence, or a new epoch
	// not starting at 0).
	ErrOutOfOrderSequence = errors.New("producerstate: out of order sequence number")
	// ErrDuplicateSequence: DUPLICATE_SEQUENCE_NUMBER. Returned only for a batch in the
	// window that came in one append with others: a duplicate alone is answered with its
	// first offsets (Verdict), never with this error.
	ErrDuplicateSequence = errors.New("producerstate: duplicate sequence number")
	// ErrInvalidProducerEpoch: INVALID_PRODUCER_EPOCH (an epoch older than the producer's).
	ErrInvalidProducerEpoch = errors.New("producerstate: invalid producer epoch")
	// ErrUnknownProducerID: UNKNOWN_PRODUCER_ID (a producer the partition has no state for,
	// sending a sequence other than 0).
	ErrUnknownProducerID = errors.New("producerstate: unknown producer id")
	// ErrInvalidRecord: INVALID_RECORD (producer fields that contradict each other).
	ErrInvalidRecord = errors.New("producerstate: invalid producer fields")
	// ErrCorruptSnapshot: a snapshot that does not decode or fails its CRC.
	ErrCorruptSnapshot = errors.New("producerstate: corrupt snapshot")
)

// BatchInfo is what the state needs of a batch: its producer fields from the header, and the
// offsets it was (or, for a leader's check, will be) appended at.
type BatchInfo struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstSeq      int32 // the batch's base sequence
	LastSeq       int32 // FirstSeq + LastOffsetDelta, wrapped past MaxInt32 to 0
	FirstOffset   batch.Offset
	LastOffset    batch.Offset
	MaxTimestamp  int64 // the batch's max timestamp: what expiry measures idleness by
}

// Idempotent reports whether the batch carries a producer id (is subject to the state).
func (b BatchInfo) Idempotent() bool { return b.ProducerID >= 0 }

// InfoOf reads a batch's header into a BatchInfo (offsets as stamped in the header).
func InfoOf(b batch.Batch) BatchInfo {
	first := b.BaseSequence()
	return BatchInfo{
		ProducerID:    b.ProducerID(),
		ProducerEpoch: b.ProducerEpoch(),
		FirstSeq:      first,
		LastSeq:       addSeq(first, b.LastOffsetDelta()),
		FirstOffset:   b.BaseOffset(),
		LastOffset:    b.LastOffset(),
		MaxTimestamp:  b.MaxTimestamp(),
	}
}

// addSeq is s+n in sequence space, which wraps from MaxInt32 to 0 (Kafka's rule). A
// negative s (no sequence) stays as it is: the check refuses such a batch anyway.
func addSeq(s, n int32) int32 {
	if s < 0 {
		return s
	}
	if s > math.MaxInt32-n {
		return n - (math.MaxInt32 - s) - 1
	}
	return s + n
}

// Verdict is the outcome of a Check that refused nothing.
type Verdict struct {
	// Duplicate is true when the append is one batch already in the window: nothing is to be
	// appended, and FirstOffset and LastOffset are where it was appended the first time.
	Duplicate   bool
	FirstOffset batch.Offset
	LastOffset  batch.Offset
}

// Run is one remembered run of a producer's batches: sequences FirstSeq..LastSeq at
// offsets FirstOffset..LastOffset, one offset a sequence (a batch whose sequences wrap past
// MaxInt32 is a run of its own).
type Run struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset batch.Offset
}

// Entry is one producer's state.
type Entry struct {
	ProducerID int64
	Epoch      int16
	// Runs are its last runs of batches (at most Window), oldest first; after an epoch
	// bump only those of the current epoch.
	Runs []Run
	// LastTimestamp is the max timestamp of its last batch (expiry's clock).
	LastTimestamp int64
}

// State is one partition's producer state. The zero State is not usable; call New.
// Not safe for concurrent use (see the package doc for its owner).
type State struct {
	producers map[int64]*producer
}

// producer is one producer's state, its window a ring of its last Window runs.
type producer struct {
	epoch  int16
	n      uint8 // runs in the window
	head   uint8 // index of the oldest
	lastTs int64
	runs   [Window]Run
}

func (p *producer) at(i int) *Run { return &p.runs[(int(p.head)+i)%Window] }

// last is the newest run in the window; ok is false for an empty window.
func (p *producer) last() (Run, bool) {
	if p.n == 0 {
		return Run{}, false
	}
	return *p.at(int(p.n) - 1), true
}

func (p *producer) push(m Run) {
	if p.n < Window {
		*p.at(int(p.n)) = m
		p.n++
		return
	}
	p.runs[p.head] = m
	p.head = (p.head + 1) % Window
}

// reset empties the window for a new epoch.
func (p *producer) reset(epoch int16) { p.epoch, p.n, p.head = epoch, 0, 0 }

func (p *producer) entry(id int64) Entry {
	e := Entry{ProducerID: id, Epoch: p.epoch, LastTimestamp: p.lastTs, Runs: make([]Run, p.n)}
	for i := range e.Runs {
		e.Runs[i] = *p.at(i)
	}
	return e
}

// New returns an empty state.
func New() *State { return &State{producers: make(map[int64]*producer)} }

// Check checks the batches of one leader append, in order, each against the state as the
// batches before it in bs would leave it (bs[i].FirstOffset and LastOffset are the offsets
// the append would give them). It changes nothing. Batches that are not idempotent pass.
// The verdict: append them all (the zero Verdict), or, when bs is exactly one batch already
// in the window, Verdict.Duplicate with its first offsets; else the first refusal, wrapped
// with the producer id, epoch and sequences (ErrDuplicateSequence for a duplicate in an
// append of several batches).
func (s *State) Check(bs []BatchInfo) (Verdict, error) {
	for i, b := range bs {
		if err := checkFields(b); err != nil {
			return Verdict{}, err
		}
		if !b.Idempotent() {
			continue
		}
		// The batches of this append before b, if any of them is b's producer's, decide
		// in place of the state: the newest of them is the producer's last batch, with a
		// window of its own that the rules need not search (a batch cannot duplicate one
		// that is not yet in the log).
		if prev, ok := lastOfProducer(bs[:i], b.ProducerID); ok {
			if err := checkAfter(b, prev.ProducerEpoch, prev.LastSeq); err != nil {
				return Verdict{}, err
			}
			continue
		}
		p, known := s.producers[b.ProducerID]
		if !known {
			if b.FirstSeq != 0 {
				return Verdict{}, refuse(ErrUnknownProducerID, b, "the partition has no state for it")
			}
			continue
		}
		if b.ProducerEpoch == p.epoch {
			for j := 0; j < int(p.n); j++ {
				first, last, ok := p.at(j).holds(b)
				if !ok {
					continue
				}
				if len(bs) > 1 {
					return Verdict{}, refuse(ErrDuplicateSequence, b, "in an append of several batches")
				}
				return Verdict{Duplicate: true, FirstOffset: first, LastOffset: last}, nil
			}
		}
		lastSeq := int32(-1)
		if m, ok := p.last(); ok {
			lastSeq = m.LastSeq
		}
		if err := checkAfter(b, p.epoch, lastSeq); err != nil {
			return Verdict{}, err
		}
	}
	return Verdict{}, nil
}

// holds reports whether the run m holds all of b's sequences, and the offsets they are at.
func (m *Run) holds(b BatchInfo) (first, last batch.Offset, ok bool) {
	if b.FirstSeq == m.FirstSeq && b.LastSeq == m.LastSeq {
		return m.FirstOffset, m.LastOffset, true // also a batch whose sequences wrap
	}
	if b.FirstSeq > b.LastSeq || m.FirstSeq > m.LastSeq || b.FirstSeq < m.FirstSeq || b.LastSeq > m.LastSeq {
		return 0, 0, false
	}
	first = m.FirstOffset + batch.Offset(b.FirstSeq-m.FirstSeq)
	return first, first + batch.Offset(b.LastSeq-b.FirstSeq), true
}

// extends reports whether b continues the run m: the next sequences at the next offsets,
// neither wrapping.
func (m *Run) extends(b BatchInfo) bool {
	return m.FirstSeq <= m.LastSeq && m.LastSeq < math.MaxInt32 && b.FirstSeq == m.LastSeq+1 &&
		b.FirstSeq <= b.LastSeq && b.FirstOffset == m.LastOffset+1 &&
		int64(b.LastOffset-b.FirstOffset) == int64(b.LastSeq-b.FirstSeq)
}

// checkFields refuses producer fields that contradict each other.
func checkFields(b BatchInfo) error {
	if b.ProducerID < 0 {
		if b.ProducerEpoch != -1 || b.FirstSeq != -1 {
			return refuse(ErrInvalidRecord, b, "no producer id, but an epoch or a sequence")
		}
		return nil
	}
	if b.ProducerEpoch < 0 || b.FirstSeq < 0 {
		return refuse(ErrInvalidRecord, b, "a producer id with a negative epoch or sequence")
	}
	return nil
}

// checkAfter applies the epoch and sequence rules to b, given its producer's epoch and the
// last sequence of its last batch (-1 for none).
func checkAfter(b BatchInfo, epoch int16, lastSeq int32) error {
	switch {
	case b.ProducerEpoch < epoch:
		return refuse(ErrInvalidProducerEpoch, b, fmt.Sprintf("the producer is at epoch %d", epoch))
	case b.ProducerEpoch > epoch:
		if b.FirstSeq != 0 {
			return refuse(ErrOutOfOrderSequence, b, fmt.Sprintf("a new epoch (was %d) must start at sequence 0", epoch))
		}
	case b.FirstSeq != addSeq(lastSeq, 1) && !(lastSeq < 0 && b.FirstSeq == 0):
		return refuse(ErrOutOfOrderSequence, b, fmt.Sprintf("expected sequence %d", addSeq(lastSeq, 1)))
	}
	return nil
}

func lastOfProducer(bs []BatchInfo, id int64) (BatchInfo, bool) {
	for i := len(bs) - 1; i >= 0; i-- {
		if bs[i].ProducerID == id {
			return bs[i], true
		}
	}
	return BatchInfo{}, false
}

func refuse(err error, b BatchInfo, why string) error {
	return fmt.Errorf("%w: producer %d epoch %d sequences %d..%d: %s",
		err, b.ProducerID, b.ProducerEpoch, b.FirstSeq, b.LastSeq, why)
}

// Update records a batch that is in the log: the leader's after its write, a follower's as it
// replicates, recovery's as it replays. It never refuses (a follower keeps what its leader
// wrote); a batch that is not idempotent is ignored. An epoch other than the producer's
// starts its window afresh (above it: the producer bumped its epoch; below it cannot come
// from a leader that checked, but the log is the truth).
func (s *State) Update(b BatchInfo) {
	if !b.Idempotent() {
		return
	}
	p := s.producers[b.ProducerID]
	if p == nil {
		p = &producer{epoch: b.ProducerEpoch}
		s.producers[b.ProducerID] = p
	}
	if b.ProducerEpoch != p.epoch {
		p.reset(b.ProducerEpoch)
	}
	if p.n > 0 {
		if m := p.at(int(p.n) - 1); m.extends(b) {
			m.LastSeq, m.LastOffset = b.LastSeq, b.LastOffset
			p.lastTs = b.MaxTimestamp
			return
		}
	}
	p.push(Run{FirstSeq: b.FirstSeq, LastSeq: b.LastSeq, FirstOffset: b.FirstOffset, LastOffset: b.LastOffset})
	p.lastTs = b.MaxTimestamp
}

// Len is the number of producers the state knows.
func (s *State) Len() int { return len(s.producers) }

// Lookup returns a producer's entry (a copy).
func (s *State) Lookup(producerID int64) (Entry, bool) {
	p, ok := s.producers[producerID]
	if !ok {
		return Entry{}, false
	}
	return p.entry(producerID), true
}

// Entries returns every producer's entry (copies), by producer id.
func (s *State) Entries() []Entry {
	ids := s.ids()
	out := make([]Entry, len(ids))
	for i, id := range ids {
		out[i] = s.producers[id].entry(id)
	}
	return out
}

func (s *State) ids() []int64 {
	ids := make([]int64, 0, len(s.producers))
	for id := range s.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Expire drops the producers whose last batch's max timestamp is expiration or more before
// nowMs (Unix milliseconds), and returns how many it dropped.
func (s *State) Expire(nowMs int64, expiration time.Duration) int {
	// nowMs-limit rather than nowMs-lastTs: a timestamp from a client can be anything, and
	// the subtraction must not overflow.
	cutoff := nowMs - expiration.Milliseconds()
	dropped := 0
	for id, p := range s.producers {
		if p.lastTs <= cutoff {
			delete(s.producers, id)
			dropped++
		}
	}
	return dropped
}

// Clone returns a deep copy (what a snapshot writer encodes outside the owner's lock).
func (s *State) Clone() *State {
	c := &State{producers: make(map[int64]*producer, len(s.producers))}
	for id, p := range s.producers {
		cp := *p
		c.producers[id] = &cp
	}
	return c
}
