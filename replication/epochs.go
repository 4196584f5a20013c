package replication

import "github.com/sluicemq/sluice/batch"

// epochCache is the leader-epoch cache (Kafka's LeaderEpochFileCache): entries ascending by
// epoch and by start offset.
//
// Invariant: for i < j, e[i].Epoch < e[j].Epoch and e[i].StartOffset <= e[j].StartOffset.
type epochCache []EpochEntry

// latest is the last entry's epoch, UndefinedEpoch when empty.
func (c epochCache) latest() int32 {
	if len(c) == 0 {
		return UndefinedEpoch
	}
	return c[len(c)-1].Epoch
}

// assign adds e unless the cache already holds its epoch or a later one. As Kafka's
// LeaderEpochFileCache.assign, entries it would make non-monotonic (an epoch started at or
// after e's start offset) are dropped first. It reports whether the cache changed.
func (c *epochCache) assign(e EpochEntry) bool {
	if e.Epoch < 0 || (len(*c) > 0 && e.Epoch <= c.latest()) {
		return false
	}
	s := *c
	for len(s) > 0 && s[len(s)-1].StartOffset >= e.StartOffset {
		s = s[:len(s)-1]
	}
	*c = append(s, e)
	return true
}

// truncateFromEnd drops the entries starting at or after end (Kafka's truncateFromEnd, after
// a log truncation to end). It reports whether the cache changed.
func (c *epochCache) truncateFromEnd(end batch.Offset) bool {
	s := *c
	n := len(s)
	for n > 0 && s[n-1].StartOffset >= end {
		n--
	}
	if n == len(s) {
		return false
	}
	*c = s[:n]
	return true
}

// truncateFromStart drops the entries wholly below start and lifts the first kept one's start
// to start (Kafka's truncateFromStart, after the log start moved up). It reports whether the
// cache changed.
func (c *epochCache) truncateFromStart(start batch.Offset) bool {
	s := *c
	// The last entry starting at or below start covers start: it is kept, from start.
	i := 0
	for i+1 < len(s) && s[i+1].StartOffset <= start {
		i++
	}
	if len(s) == 0 || (i == 0 && s[0].StartOffset >= start) {
		return false
	}
	changed := i > 0 || s[i].StartOffset != start
	if s[i].StartOffset < start {
		s[i].StartOffset = start
	}
	if i > 0 {
		*c = append(s[:0], s[i:]...)
	}
	return changed
}

// endOffsetFor is Kafka's LeaderEpochFileCache.endOffsetFor: for the latest epoch, the log
// end; for an older epoch the cache holds, that epoch and the start of the next one; for an
// epoch between two entries, the floor entry's epoch and the start of the next; for an epoch
// below every entry, the epoch asked and the first entry's start (what is below it is no
// longer in the log); for an undefined epoch, an epoch above the latest or an empty cache,
// UndefinedEpoch and UndefinedOffset.
func (c epochCache) endOffsetFor(epoch int32, logEnd batch.Offset) (int32, batch.Offset) {
	if epoch == UndefinedEpoch || len(c) == 0 {
		return UndefinedEpoch, UndefinedOffset
	}
	if epoch == c.latest() {
		return epoch, logEnd
	}
	// higher: the first entry with a greater epoch.
	higher := -1
	for i := range c {
		if c[i].Epoch > epoch {
			higher = i
			break
		}
	}
	if higher < 0 {
		return UndefinedEpoch, UndefinedOffset
	}
	if higher == 0 {
		return epoch, c[0].StartOffset
	}
	return c[higher-1].Epoch, c[higher].StartOffset
}
