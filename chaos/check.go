package chaos

import (
	"errors"
	"time"
)

// The checker. Check reads a whole history and the run's final state and counts each anomaly
// by Jepsen's name. Definitions (a partition is a topic-partition; the final read is the events
// of Reader FinalReader, which read every partition from its log start to its high watermark):
//
//   - lost: a send acknowledged (OK) whose value is not in its partition's final read. Each is
//     listed with the offset it was acknowledged at and what the final read has there.
//   - duplicated: one sent value at two or more offsets of the final read (counted once per
//     extra copy). Without idempotence, retries may duplicate (Kafka's at-least-once): they are
//     then reported but are an anomaly only with CheckOptions.Idempotent.
//   - inconsistent: two different values seen at one (partition, offset) across every read and
//     every acknowledged offset (an acknowledgement says offset o holds value v).
//   - non-monotonic: in a partition's final read, one writer's values out of its send order
//     (first occurrences only; a duplicate of an earlier value is a duplicate, not a reorder).
//     An anomaly only where ordering is promised (CheckOptions.Ordered: idempotence, or at most
//     one request in flight).
//   - unexpected: a value read that no writer ever sent (with any outcome), or that does not
//     parse as a Value.
//   - skip / backward: within one reader's pass over one partition, an offset more than one
//     past the previous (a skip: offsets are dense, there are no transactions or compaction
//     yet) or not past it (backward).
//   - commit regression: a committed offset read back (EvCommitted) below one the same group
//     committed with OK for that partition earlier, or a committed offset that went down.
//   - group-missed (at least once): a send acknowledged at an offset below its partition's
//     final committed offset of a group (EvCommitted, fetched once the group's consumers
//     stopped) that no consumer of the group delivered (EvDeliver). Only for groups with
//     deliveries.
//   - group-gap and group-repeat (exactly once among the committed records): a group's
//     deliveries of a partition come in runs, one per consumer from the partition's assignment
//     (EvAssign) to its revocation (EvRevoke) or the consumer's crash (EvConsumerCrash).
//     Within a run the offsets follow each other; one more than one past the previous is a
//     group-gap, one not past it a group-repeat. A run begins at the group's committed offset
//     when the consumer got the partition (the log start when nothing was committed), which
//     lies between lo, the highest offset committed with OK before the EvAssign, and hi, the
//     highest any commit not Refused asked for before the run's first delivery (a Failed one
//     may have been applied): a run that begins below lo delivers committed records again (a
//     group-repeat), one that begins past hi skips records never committed (a group-gap), as
//     does a final committed offset past the high watermark. Deliveries of an offset the group
//     had delivered before, in a run that began where it should, are redeliveries (the tail a
//     consumer delivered and did not commit before it crashed or lost the partition):
//     counted, not anomalies. A delivery's value must be the one every other observation saw
//     at its offset (inconsistent otherwise), and a writer's (unexpected otherwise).
//   - group-unowned: a group consumer's delivery of a partition it had not been given
//     (no EvAssign) or had given up (EvRevoke): the client returned records it does not own.
//     (A consumer that lost its partitions and has not learnt it yet, a zombie, still owns
//     them as far as it knows: that is Kafka's behaviour, and its commits are refused.)
//   - divergent: a replica whose log differs from its leader's below the high watermark
//     (FinalState.Divergences, found by CompareReplicas).
//   - incomplete: a partition whose final read is missing or ended below its high watermark;
//     the run cannot vouch for it, which is an anomaly too.
//
// Availability: the outages are, per partition, the gaps between consecutive acknowledgements
// of its writes (by completion time) longer than CheckOptions.OutageThreshold, each attributed
// to the fault that began it: the latest EvFault injected before the gap was
// OutageThreshold old (the gap begins at the last acknowledgement before its fault) and healed
// less than RecoveryWindow before the gap began, else the latest injected inside the gap, else
// "none"; a gap that ends after the heal is the fault's recovery. Result.Longest is the longest, Result.LongestByFault the
// longest per fault kind, Result.LongestAll the longest time with no write acknowledged on any
// partition.

// CheckOptions says what the run promised.
type CheckOptions struct {
	Idempotent      bool          // duplicates are anomalies
	Ordered         bool          // one writer's values keep their order in a partition
	OutageThreshold time.Duration // gaps shorter than this are not outages (0: 1 s)
	// RecoveryWindow is how long after its heal a fault still explains a gap that begins
	// (0: 10 s); a gap that begins later, with no fault injected inside it, is "none": a
	// stall no fault caused.
	RecoveryWindow time.Duration
}

// FinalState is what the end of a run found, beside the history's final read.
type FinalState struct {
	// HighWatermarks is each partition's HW (the end of its final read must reach it).
	HighWatermarks map[TopicPartition]int64
	// LogStarts is each partition's log start offset (the final read begins there).
	LogStarts map[TopicPartition]int64
	// Divergences are replica logs that differ from the leader's below the HW.
	Divergences []Divergence
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Divergence is one replica's log differing from its leader's.
type Divergence struct {
	TopicPartition
	Broker int32
	Leader int32
	Offset int64  // the first offset where they differ
	Detail string // what differs (a missing batch, another CRC, ...)
}

// Anomaly is one finding, with what the report says about it.
type Anomaly struct {
	Kind string // anomalyKinds: "lost", "duplicated", ..., "group-missed", "group-gap", "group-repeat", "group-unowned", "divergent", "incomplete"
	TopicPartition
	Offset int64
	Value  string
	Detail string
}

// Outage is a time with no acknowledged write to a partition (TopicPartition zero: to any).
type Outage struct {
	TopicPartition
	Start, End time.Duration // since the run's start
	Fault      string        // the fault kind that explains it, or "none"
	FaultID    int
}

// Duration is the outage's length.
func (o Outage) Duration() time.Duration { return o.End - o.Start }

// Result is the checker's findings.
type Result struct {
	Sends          int // send events
	Acknowledged   int // of them OK
	Failed         int // of them Failed (indeterminate)
	FailedFound    int // failed sends whose value is in the final read anyway
	Reads          int // records read, the final read included
	Faults         int // EvFault events
	Lost           int
	Duplicated     int
	Inconsistent   int
	NonMonotonic   int
	Unexpected     int
	Skips          int
	Backward       int
	CommitRegress  int
	GroupMissed    int // group-missed
	GroupGaps      int // group-gap
	GroupRepeats   int // group-repeat
	GroupUnowned   int // group-unowned
	Divergent      int
	Incomplete     int
	Anomalies      []Anomaly // every finding, at most CheckOptions' cap per kind (see Check)
	Longest        Outage
	LongestByFault map[string]Outage
	Outages        []Outage // every partition's outages, in time order
	LongestAll     Outage   // the longest time with no write acknowledged anywhere
	Options        CheckOptions

	// The group consumers: records delivered (EvDeliver, redeliveries included), of them
	// deliveries of an offset the group had delivered before (allowed: the uncommitted tail
	// of a consumer that crashed or lost its partitions), and the harness's crashes.
	GroupDelivered int
	Redelivered    int
	GroupCrashes   int
}

// Count is the number of findings that make the run fail: every kind above, duplicates and
// reorders only where the options promise their absence.
func (r *Result) Count() int {
	n := r.Lost + r.Inconsistent + r.Unexpected + r.Skips + r.Backward + r.CommitRegress + r.Divergent + r.Incomplete +
		r.GroupMissed + r.GroupGaps + r.GroupRepeats + r.GroupUnowned
	if r.Options.Idempotent {
		n += r.Duplicated
	}
	if r.Options.Ordered {
		n += r.NonMonotonic
	}
	return n
}

// Verdict is the one-line summary, e.g. "42 faults in 10m0s: 61,234 acknowledged, 0 lost,
// 0 duplicated, 0 inconsistent, 0 divergent, 61,540 delivered to the group (306 redelivered,
// 40 consumer crashes); longest outage 3.1 s (kill-leader)", with the group's part only when
// there were deliveries, and the other kinds appended when not zero.
//
// Duplicates without Idempotent read "12 duplicated (retries without idempotence)", reorders
// without Ordered "3 non-monotonic (ordering not promised)": counted, not failing the run.
func (r *Result) Verdict(elapsed time.Duration) string { return verdict(r, elapsed) }

// Check reads the history (events in file order) and the final state and returns the
// findings. It keeps per partition an offset → value map of everything read, so its memory is
// proportional to the distinct records, not to the reads. It lists at most 1,000 anomalies of
// each kind (the counts are exact).
//
// An event that cannot be checked (a read whose offsets and values differ in number) is an
// error wrapping ErrBadEvent; so is any error of history.
func Check(history func(fn func(Event) error) error, final FinalState, opts CheckOptions) (*Result, error) {
	c := newChecker(final, opts)
	if err := history(func(e Event) error { return c.event(&e) }); err != nil {
		return nil, err // ReadHistory's and the checker's errors say what they are
	}
	return c.finish(), nil
}

// ErrBadEvent is a history event the checker cannot make sense of.
var ErrBadEvent = errors.New("chaos: malformed history event")
