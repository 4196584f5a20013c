package broker

// The high-watermark checkpoint: the data directory's replication-offset-checkpoint (Kafka's
// name and format) holds every hosted partition's high watermark. It is read once, at Open,
// before any partition opens (each replica starts from its partition's entry: logState), then
// written every replica.high.watermark.checkpoint.interval.ms when a high watermark moved, and
// once more in Close after the last request is answered. A high watermark checkpointed late is
// only behind, never ahead: a replica restarting from it learns the real one from its leader,
// and a leader's catches up as its followers fetch.

import (
	"maps"
	"path/filepath"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/segment"
)

// loadHWCheckpoint reads the data directory's high-watermark checkpoint into b.hwLoaded (Open,
// before the partitions open). A missing file is an empty checkpoint (a new data directory, or
// one made before replication); an unreadable one is logged and treated as missing, which
// starts every multi-replica partition's high watermark at its log start: safe, as the
// leaders' fetch responses teach the followers theirs.
func (b *Broker) loadHWCheckpoint() {
	hws, err := b.readHWCheckpoint(filepath.Join(b.cfg.DataDir, segment.OffsetCheckpointFile))
	if err != nil {
		b.logger.Warn("high-watermark checkpoint unreadable; partitions start from their log start", "err", err)
		hws = nil
	}
	b.hwLoaded = hws
}

// checkpointedHW is tp's high watermark as the checkpoint read at Open has it.
func (b *Broker) checkpointedHW(tp topicPartition) (batch.Offset, bool) {
	hw, ok := b.hwLoaded[tp]
	return hw, ok
}

// writeHWCheckpoint writes every hosted partition's high watermark, if any changed since the
// last write. Partitions assigned here whose log is not open keep the entry read at Open. Only
// Open's periodic goroutine (every HighWatermarkCheckpoint) and Close, after that goroutine has
// stopped, call it.
func (b *Broker) writeHWCheckpoint() {
	hws := map[topicPartition]batch.Offset{}
	b.mu.RLock()
	for tp, p := range b.mu.partitions {
		hws[tp] = p.highWatermark()
	}
	for tp := range b.mu.unopened {
		if hw, ok := b.hwLoaded[tp]; ok {
			hws[tp] = hw
		}
	}
	b.mu.RUnlock()
	if b.hwWritten != nil && maps.Equal(hws, b.hwWritten) {
		return
	}
	if err := b.writeHWCheckpointFile(filepath.Join(b.cfg.DataDir, segment.OffsetCheckpointFile), hws); err != nil {
		b.logger.Error("writing the high-watermark checkpoint", "err", err)
		return
	}
	b.hwWritten = hws
}
