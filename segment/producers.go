package segment

// Behavior: the producer state (idempotence).
//
// The log owns its partition's producerstate.State, guarded by appendMu. Append (the leader's)
// checks its batches against it after assigning their offsets and before writing, under
// appendMu: a duplicate writes nothing and returns the first offsets with
// AppendInfo.Duplicate; a refusal returns the producerstate error wrapped, writing nothing
// and changing no state; otherwise the write, then the state's Update of every batch. A write
// that fails updates nothing. AppendAsFollower updates the state from the batches it writes,
// refusing none. Snapshots (<base>.snapshot, 20 digits, Kafka's name) are written at each
// roll (the state as of the new segment's base, encoded outside appendMu) and at Close (as
// of the log end). Open loads the newest snapshot at or below the recovered log end that
// decodes (a corrupt one is logged and skipped, and removed) and replays the batch headers
// after it; without one, from the log start. TruncateTo reloads the newest snapshot at or
// below the new end and replays up to it, removing the snapshots above it;
// TruncateFullyAndStartAt empties the state and removes every snapshot. Retention removes
// the snapshots below the new log start, except the newest.

import (
	"time"

	"github.com/sluicemq/sluice/producerstate"
)

// snapshotSuffix names producer-state snapshot files: <base offset, 20 digits>.snapshot.
const snapshotSuffix = ".snapshot"

// ExpireProducers drops the producers idle for Options.ProducerIDExpiration as of now (the
// broker calls it periodically) and returns how many it dropped.
func (l *Log) ExpireProducers(now time.Time) int { panic("segment: not built yet") }

// Producers returns a copy of the log's producer entries, by producer id (DescribeProducers,
// tests).
func (l *Log) Producers() []producerstate.Entry { panic("segment: not built yet") }

// ProducerCount is the number of producers the log's state knows.
func (l *Log) ProducerCount() int { panic("segment: not built yet") }
