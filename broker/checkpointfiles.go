package broker

// The checkpoint files' formats are the segment package's (segment/replcheckpoint.go: the data
// directory's replication-offset-checkpoint, a partition directory's leader-epoch-checkpoint;
// segment/epochscan.go rebuilds the latter from a log); these adapters are the broker's one
// use of them, converting to the broker's and the replication package's types.

import (
	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/replication"
	"github.com/sluicemq/sluice/segment"
)

// checkpointFS is the file system the checkpoints are on: the logs' (a test's ErrorFS reaches
// them too).
func (b *Broker) checkpointFS() vfs.FS {
	if b.cfg.logFS != nil {
		return b.cfg.logFS
	}
	return vfs.Default
}

// readHWCheckpoint reads a replication-offset-checkpoint; a missing file is an empty one.
func (b *Broker) readHWCheckpoint(path string) (map[topicPartition]batch.Offset, error) {
	m, err := segment.ReadOffsetCheckpoint(b.checkpointFS(), path)
	if err != nil {
		return nil, err
	}
	out := make(map[topicPartition]batch.Offset, len(m))
	for tp, off := range m {
		out[topicPartition{tp.Topic, tp.Partition}] = off
	}
	return out, nil
}

// writeHWCheckpointFile writes a replication-offset-checkpoint atomically.
func (b *Broker) writeHWCheckpointFile(path string, hws map[topicPartition]batch.Offset) error {
	m := make(map[segment.TopicPartition]batch.Offset, len(hws))
	for tp, off := range hws {
		m[segment.TopicPartition{Topic: tp.topic, Partition: tp.partition}] = off
	}
	return segment.WriteOffsetCheckpoint(b.checkpointFS(), path, m)
}

// readLeaderEpochs reads l's leader-epoch-checkpoint; found is false when there is none.
func (b *Broker) readLeaderEpochs(l *segment.Log) (epochs []replication.EpochEntry, found bool, err error) {
	es, err := segment.ReadLeaderEpochCheckpoint(b.checkpointFS(), l.Dir())
	if err != nil || es == nil {
		return nil, false, err
	}
	return fromEpochStarts(es), true, nil
}

// scanLeaderEpochs rebuilds l's leader-epoch cache from its batches' headers (a data directory
// made before the checkpoint, or an unreadable checkpoint). A scan that fails leaves the cache
// empty, logged: the replica then holds no epoch, and as a follower fetches from its log end.
func (b *Broker) scanLeaderEpochs(p *partition, l *segment.Log) []replication.EpochEntry {
	es, err := l.ScanLeaderEpochs()
	if err != nil {
		b.logger.Warn("rebuilding the leader-epoch cache from the log", "partition", p.tp.String(), "err", err)
		return nil
	}
	return fromEpochStarts(es)
}

// writeLeaderEpochs writes l's leader-epoch-checkpoint atomically.
func (b *Broker) writeLeaderEpochs(l *segment.Log, epochs []replication.EpochEntry) error {
	es := make([]segment.EpochStart, len(epochs))
	for i, e := range epochs {
		es[i] = segment.EpochStart{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return segment.WriteLeaderEpochCheckpoint(b.checkpointFS(), l.Dir(), es)
}

func fromEpochStarts(es []segment.EpochStart) []replication.EpochEntry {
	out := make([]replication.EpochEntry, len(es))
	for i, e := range es {
		out[i] = replication.EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}
