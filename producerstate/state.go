package producerstate

import (
	"errors"
	"time"

	"github.com/sluicemq/sluice/batch"
)

// Window is how many batches per producer the state remembers: Kafka's 5, matching
// max.in.flight.requests.per.connection ≤ 5 for an idempotent producer.
const Window = 5

// Errors, each mapped to Kafka's error code by the broker.
var (
	// ErrOutOfOrderSequence: OUT_OF_ORDER_SEQUENCE_NUMBER (a gap in sequence, or a new epoch
	// not starting at 0).
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrDuplicateSequence: DUPLICATE_SEQUENCE_NUMBER. Returned only for a batch in the
	// window that came in one append with others: a duplicate alone is answered with its
	// first offsets (Verdict), never with this error.
	ErrDuplicateSequence = errors.New("duplicate sequence number")
	// ErrInvalidProducerEpoch: INVALID_PRODUCER_EPOCH (an epoch older than the producer's).
	ErrInvalidProducerEpoch = errors.New("invalid producer epoch")
	// ErrUnknownProducerID: UNKNOWN_PRODUCER_ID (a producer the partition has no state for,
	// sending a sequence other than 0).
	ErrUnknownProducerID = errors.New("unknown producer id")
	// ErrInvalidRecord: INVALID_RECORD (producer fields that contradict each other).
	ErrInvalidRecord = errors.New("invalid producer fields")
	// ErrCorruptSnapshot: a snapshot that does not decode or fails its CRC.
	ErrCorruptSnapshot = errors.New("corrupt producer-state snapshot")
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
	panic("producerstate: not built yet")
}

// Verdict is the outcome of a Check that refused nothing.
type Verdict struct {
	// Duplicate is true when the append is one batch already in the window: nothing is to be
	// appended, and FirstOffset and LastOffset are where it was appended the first time.
	Duplicate   bool
	FirstOffset batch.Offset
	LastOffset  batch.Offset
}

// BatchMeta is one remembered batch of a producer.
type BatchMeta struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset batch.Offset
}

// Entry is one producer's state.
type Entry struct {
	ProducerID int64
	Epoch      int16
	// Batches are its last batches (at most Window), oldest first; after an epoch bump only
	// those of the current epoch.
	Batches []BatchMeta
	// LastTimestamp is the max timestamp of its last batch (expiry's clock).
	LastTimestamp int64
}

// State is one partition's producer state. The zero State is not usable; call New.
// Not safe for concurrent use (see the package doc for its owner).
type State struct {
	// implementation's
}

// New returns an empty state.
func New() *State { panic("producerstate: not built yet") }

// Check checks the batches of one leader append, in order, each against the state as the
// batches before it in bs would leave it (bs[i].FirstOffset and LastOffset are the offsets
// the append would give them). It changes nothing. Batches that are not idempotent pass.
// The verdict: append them all (the zero Verdict), or, when bs is exactly one batch already
// in the window, Verdict.Duplicate with its first offsets; else the first refusal, wrapped
// with the producer id, epoch and sequences (ErrDuplicateSequence for a duplicate in an
// append of several batches).
func (s *State) Check(bs []BatchInfo) (Verdict, error) { panic("producerstate: not built yet") }

// Update records a batch that is in the log: the leader's after its write, a follower's as it
// replicates, recovery's as it replays. It never refuses (a follower keeps what its leader
// wrote); a batch that is not idempotent is ignored. An epoch above the producer's starts its
// window afresh.
func (s *State) Update(b BatchInfo) { panic("producerstate: not built yet") }

// Len is the number of producers the state knows.
func (s *State) Len() int { panic("producerstate: not built yet") }

// Lookup returns a producer's entry (a copy).
func (s *State) Lookup(producerID int64) (Entry, bool) { panic("producerstate: not built yet") }

// Entries returns every producer's entry (copies), by producer id.
func (s *State) Entries() []Entry { panic("producerstate: not built yet") }

// Expire drops the producers whose last batch's max timestamp is expiration or more before
// nowMs (Unix milliseconds), and returns how many it dropped.
func (s *State) Expire(nowMs int64, expiration time.Duration) int {
	panic("producerstate: not built yet")
}

// Clone returns a deep copy (what a snapshot writer encodes outside the owner's lock).
func (s *State) Clone() *State { panic("producerstate: not built yet") }
