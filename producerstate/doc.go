// Package producerstate is one partition's idempotent-producer state: per producer id, its
// epoch and the metadata of its last Window runs of batches appended, which decides whether a
// batch arriving at the leader is new, a retry of a batch already in the log (a duplicate:
// answered with the offsets it got the first time, appended again never), or refused
// (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID,
// INVALID_RECORD).
//
// It is a pure state machine (no goroutines, no I/O, no clock: times come in as arguments),
// and not safe for concurrent use: its owner is the partition's log (segment.Log), which
// checks and updates it under its append lock, so that the check, the offset assignment and
// the write are one step and two in-flight copies of one batch can never both land. The
// state lives with the log rather than beside it: a leader updates it with the batches it
// appends, a follower with the batches it replicates (so a new leader deduplicates exactly
// as the old one did), and recovery rebuilds it from the newest snapshot plus the batches
// after it.
//
// # The rules (Kafka's, ProducerStateManager and ProducerAppendInfo)
//
// Sequences are per record: a batch of n records from base sequence s covers s..s+n-1,
// wrapping from MaxInt32 to 0. For a batch of producer id p, epoch e, sequences f..l:
//
//   - p < 0 (not idempotent) with e or f not -1, or p ≥ 0 with e < 0 or f < 0: ErrInvalidRecord.
//   - p unknown: accepted if f is 0 (a new producer, or a new epoch of one that expired),
//     else ErrUnknownProducerID, which tells the client its sequences can be reset safely.
//   - e below p's epoch: ErrInvalidProducerEpoch.
//   - e above p's epoch: accepted if f is 0 (the producer bumped its epoch and reset its
//     sequences), else ErrOutOfOrderSequence.
//   - e equal: a batch whose sequences f..l all lie in a run in the window is a duplicate
//     (answered with the offsets they are at: a run has one offset a sequence); a batch whose
//     f is the last run's l+1 is accepted; anything else is ErrOutOfOrderSequence (a gap, a
//     batch that overlaps what was appended only in part, or a retry older than the window,
//     which cannot happen with at most Window requests in flight).
//
// A run is a producer's batches that follow each other in sequence and in offset: the
// batches of one append always do. Kafka remembers each producer's last 5 batches; 5 runs are
// never less (a run is at least a batch) and hold every batch of the last 5 appends however
// many each had, so a producer may send all its waiting batches of a partition in one request
// and still have every one of them recognized on a retry. Leader, followers and replay build
// the same runs, from the batches in the log.
//
// Checks change nothing; Update records a batch once it is in the log. A refused batch leaves
// the state as it was.
//
// # Snapshots
//
// A snapshot is the whole state as of an offset (every batch below it applied, none at or
// above it), in a small binary format with a CRC (snapshot.go): the log writes one at each
// segment roll, named by the new segment's base, and one at the log end at a clean close.
// Expiry drops producers idle longer than producer.id.expiration.ms, measured, as in Kafka,
// against the max timestamp of their last batch, so that a leader and its followers, and a
// replay, agree.
package producerstate
