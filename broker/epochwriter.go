package broker

// The epoch writer: one goroutine writes the partitions' leader-epoch-checkpoint files as
// their replicas' caches change (applyReady queues them), newest cache only, one partition at a
// time, with no lock held: a stalled disk delays the file, never the reconciler or a produce.
// Close writes what is still queued after the writer has stopped.
//
// The file lags the cache by one write at most, and only across a crash does that matter: the
// restarted replica then lacks the newest epoch's entry (or still has one a truncation removed)
// and reads its records as of the previous epoch. As a follower it then asks its leader for the
// end of that epoch and truncates at most to where the newer one starts, fetching the rest
// again; its records are never the only copy of an acknowledged write, which is on at least
// min.insync.replicas replicas. Kafka's LeaderEpochFileCache, too, flushes its file apart from
// the append path since 3.7 (KAFKA-15046).

import (
	"path/filepath"
	"sync"

	"github.com/sluicemq/sluice/replication"
	"github.com/sluicemq/sluice/segment"
)

// epochWrites is the epoch writer's queue: the partitions whose cache changed since their last
// write, each with its newest cache.
type epochWrites struct {
	mu      sync.Mutex
	pending map[*partition][]replication.EpochEntry
	kick    chan struct{} // buffered 1
}

// queueEpochs queues p's epoch cache for writing (under repMu: it only takes the queue's lock).
func (b *Broker) queueEpochs(p *partition, epochs []replication.EpochEntry) {
	q := &b.epochQ
	q.mu.Lock()
	if q.pending == nil {
		q.pending = map[*partition][]replication.EpochEntry{}
	}
	q.pending[p] = append([]replication.EpochEntry(nil), epochs...)
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// epochWriterLoop writes the queued caches as they come.
func (b *Broker) epochWriterLoop() {
	defer b.wg.Done()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.epochQ.kick:
			b.writeQueuedEpochs()
		}
	}
}

// writeQueuedEpochs writes every queued cache. A write that fails removes the file, so that the
// next start rebuilds the cache from the log's batches rather than trusting a stale one; the
// replica goes on with its cache in memory.
func (b *Broker) writeQueuedEpochs() {
	q := &b.epochQ
	q.mu.Lock()
	pending := q.pending
	q.pending = nil
	q.mu.Unlock()
	for p, epochs := range pending {
		l := p.log()
		if err := b.writeLeaderEpochs(l, epochs); err != nil {
			if l.Err() != nil || b.partition(p.tp.topic, p.tp.partition) != p {
				continue // a stopped or deleted log: its replica is rebuilt or gone
			}
			b.logger.Error("writing leader-epoch-checkpoint; the next start rebuilds it from the log", "partition", p.tp.String(), "err", err)
			if rerr := b.checkpointFS().Remove(filepath.Join(l.Dir(), segment.LeaderEpochCheckpointFile)); rerr != nil {
				b.logger.Debug("removing a stale leader-epoch-checkpoint", "partition", p.tp.String(), "err", rerr)
			}
		}
	}
}
