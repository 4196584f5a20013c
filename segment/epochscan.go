package segment

import (
	"fmt"

	"github.com/sluicemq/sluice/batch"
)

// ScanLeaderEpochs rebuilds the leader-epoch cache from the batch headers (their partition
// leader epoch field), for a log that has no leader-epoch-checkpoint (a data directory made
// before leader epochs were kept): one entry per epoch change, the start offset being the base
// of the first batch of the epoch. It reads only headers: a 61-byte read per batch, skipping
// the rest by the batch's length, so its I/O is the number of batches, not the log's bytes.
//
// Epochs are taken as Kafka's cache assigns them: only rising. A batch with a negative epoch
// (written without one) or an epoch below the last entry's is skipped. The log may take
// appends meanwhile: the scan stops at each segment's size when it reaches it.
func (l *Log) ScanLeaderEpochs() ([]EpochStart, error) {
	if err := l.Err(); err != nil {
		return nil, err
	}
	var entries []EpochStart
	var hdr [batch.HeaderSize]byte
	for {
		entries = entries[:0]
		retry := false
		for _, s := range l.Segments() {
			var err error
			if entries, retry, err = s.scanEpochs(entries, &hdr); err != nil {
				return nil, fmt.Errorf("scan leader epochs in %s: %w", l.dir, err)
			}
			if retry {
				break
			}
		}
		if !retry {
			return entries, nil
		}
		if e := l.closeErr.Load(); e != nil {
			return nil, *e
		}
	}
}

// scanEpochs appends s's epoch changes to entries. retry: the segment left the log, or a
// truncation cut it, under the scan (read the segment list again).
func (s *Segment) scanEpochs(entries []EpochStart, hdr *[batch.HeaderSize]byte) (_ []EpochStart, retry bool, _ error) {
	ok, err := s.acquireFile()
	if err != nil || !ok {
		return entries, err == nil, err
	}
	defer s.release()
	cuts := s.cuts.Load()
	err = s.eachHeader(0, s.size.Load(), hdr, func(h batch.Batch, _ int64) bool {
		if e := h.PartitionLeaderEpoch(); e >= 0 && (len(entries) == 0 || e > entries[len(entries)-1].Epoch) {
			entries = append(entries, EpochStart{Epoch: e, StartOffset: h.BaseOffset()})
		}
		return true
	})
	if err != nil && (cuts%2 == 1 || s.cuts.Load() != cuts) {
		return entries, true, nil
	}
	return entries, false, err
}
