package broker

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/internal/retry"
	"github.com/sluicemq/sluice/segment"
)

// The log supervisor brings stopped partition logs back without a restart.
//
// A segment.Log stops only on an I/O error of its data (a failed write, fsync or msync; see
// segment/resource.go): it then refuses appends and reads, and fails its durability waiters.
// Its OnFailure wakes the supervisor, which wakes the partition's parked fetches (they answer
// with the error at once), and reopens the log through recovery after log.retry.backoff.ms,
// then after twice as long at each failed attempt, up to log.retry.backoff.max.ms. Recovery
// rescans what the disk holds past the recovery point, cuts the log at the first bad batch and,
// with DistrustUnsynced, writes the scanned tail again before syncing it (after a failed fsync
// the kernel may hold the pages it could not write as clean). The reopened log is swapped into
// the partition, its parked fetches are woken to read from it, and "log recovered" is logged
// with its offsets and how long it was down. A partition whose log failed to open (at a start,
// or for a new topic) is opened again the same way, by a reconcile of the current metadata
// (retryUnopened), not left offline until the next metadata change.
//
// Meanwhile produce and fetch get KAFKA_STORAGE_ERROR, which clients retry. Nothing
// acknowledged is lost: an acks=all append on a write.caching=false topic is answered only once
// the high watermark passes it, which counts the leader's own offset only once fsynced on the
// log that took it, so a write whose fsync failed is answered with the error (the waits on the
// stopped log are answered KAFKA_STORAGE_ERROR), never acknowledged by the reopened log; what
// recovery keeps of it is durable (written again and synced) before the new log serves it. The
// partition's replica is rebuilt for the reopened log (replica.go: resetReplica): its high
// watermark kept (clamped to the new log end), its epoch cache less the entries past it, and
// the committed leadership applied to it again.
//
// Ownership: the supervisor goroutine (healLoop) owns its map of stopped logs; it swaps a
// partition's log only under reconcileMu, after checking that the partition is still the one
// hosted (a deleted topic's partition is never brought back). Close cancels b.ctx and waits
// for it through wg.

// healState is the supervisor's record of one stopped log. It outlives the reopening by
// log.retry.backoff.max.ms: a log that stops again within that time (a disk that takes the
// reopening but fails the next write) is reopened after a backoff that goes on doubling, not
// one back at its minimum.
type healState struct {
	log       *segment.Log // the stopped log; nil once reopened
	since     time.Time    // when the supervisor found it stopped
	next      time.Time    // when to try reopening it
	recovered time.Time    // when it was last reopened
	attempts  int
	backoff   retry.Backoff
}

// logStopped is every partition log's segment.Options.OnFailure: it wakes the supervisor. It
// runs with the log's locks held, so it only signals.
func (b *Broker) logStopped(error) {
	select {
	case b.healKick <- struct{}{}:
	default:
	}
}

// healLoop is the log supervisor's goroutine: a pass when a log stops and whenever the next
// attempt is due.
func (b *Broker) healLoop() {
	defer b.wg.Done()
	stopped := map[*partition]*healState{}
	unopened := openRetry{backoff: retry.Backoff{Min: b.cfg.LogRetryBackoff, Max: b.cfg.LogRetryBackoffMax}}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.healKick:
		case <-timer.C:
		}
		now := time.Now()
		next := b.healPass(stopped, now)
		if at := b.retryUnopened(&unopened, now); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
	}
}

// openRetry is the supervisor's record of the partitions whose logs failed to open (at a
// start, or for a new topic: EMFILE at the file limit, a disk error): they are opened again
// after log.retry.backoff.ms, then after twice as long at each failed attempt, up to
// log.retry.backoff.max.ms, without waiting for a metadata change to reconcile them.
type openRetry struct {
	backoff retry.Backoff
	next    time.Time // when to try again; zero while no open has failed
}

// retryUnopened reconciles the current metadata again (which opens what is missing) when a
// partition's log failed to open and its attempt is due. It returns when the next attempt is
// (zero when no open has failed).
func (b *Broker) retryUnopened(r *openRetry, now time.Time) time.Time {
	if !b.openFailed() {
		r.next = time.Time{}
		r.backoff.Reset()
		return time.Time{}
	}
	if r.next.IsZero() {
		r.next = now.Add(r.backoff.Next())
	}
	if now.Before(r.next) || b.ctx.Err() != nil {
		return r.next
	}
	if err := b.reconcile(b.ctrl.Metadata()); err != nil {
		b.logger.Debug("opening partition logs again failed; retrying", "err", err)
	}
	if !b.openFailed() {
		b.logger.Info("partition logs that had failed to open are open")
		r.next = time.Time{}
		r.backoff.Reset()
		return time.Time{}
	}
	r.next = now.Add(r.backoff.Next())
	return r.next
}

// openFailed reports whether a partition assigned to this broker failed to open its log.
func (b *Broker) openFailed() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, err := range b.mu.unopened {
		if err != nil {
			return true
		}
	}
	return false
}

// healPass finds the stopped logs, reopens those whose attempt is due, and returns when the
// next attempt is (zero when no log is stopped).
func (b *Broker) healPass(stopped map[*partition]*healState, now time.Time) time.Time {
	found := map[*partition]bool{}
	var next time.Time
	for _, p := range b.partitionList() {
		l := p.log()
		if l.Err() == nil {
			continue
		}
		st := stopped[p]
		if st == nil {
			st = &healState{backoff: retry.Backoff{Min: b.cfg.LogRetryBackoff, Max: b.cfg.LogRetryBackoffMax}}
			stopped[p] = st
		}
		if st.log != l {
			if !st.recovered.IsZero() && now.Sub(st.recovered) > b.cfg.LogRetryBackoffMax {
				st.backoff.Reset() // healthy for long enough since the last reopening
			}
			st.log, st.since, st.attempts = l, now, 0
			st.next = now.Add(st.backoff.Next())
			p.wake() // parked fetches answer with the error now, not at their max wait
			b.logger.Warn("partition log stopped; reopening it through recovery",
				"partition", p.tp.String(), "log_end", l.EndOffset(), "synced", l.SyncedOffset(),
				"retry_in", st.next.Sub(now), "err", l.Err())
		}
		if !now.Before(st.next) {
			if b.ctx.Err() != nil {
				return time.Time{}
			}
			if b.reopenLog(p, st, now) {
				st.log, st.recovered = nil, now
				continue
			}
			st.next = now.Add(st.backoff.Next())
		}
		found[p] = true
		if next.IsZero() || st.next.Before(next) {
			next = st.next
		}
	}
	for p, st := range stopped {
		if !found[p] && (st.log != nil || now.Sub(st.recovered) > b.cfg.LogRetryBackoffMax) {
			delete(stopped, p) // deleted, or healthy for long enough
		}
	}
	return next
}

// reopenLog closes p's stopped log, opens it again through recovery and swaps it in. It reports
// whether p needs nothing more (reopened, or no longer hosted). Under reconcileMu: the
// reconciler neither deletes p nor reconfigures its log meanwhile.
func (b *Broker) reopenLog(p *partition, st *healState, now time.Time) bool {
	b.reconcileMu.Lock()
	defer b.reconcileMu.Unlock()
	if b.partition(p.tp.topic, p.tp.partition) != p || p.log() != st.log {
		return true
	}
	old := st.log
	_ = old.Close() // returns the error that stopped it; its files close as readers release them
	opts := b.logOptions(p.cfg.Load())
	opts.DistrustUnsynced = true
	l, err := segment.Open(old.Dir(), opts)
	st.attempts++
	if err != nil {
		if st.attempts == 1 {
			b.logger.Warn("reopening partition log failed; retrying", "partition", p.tp.String(), "err", err)
		} else {
			b.logger.Debug("reopening partition log failed; retrying", "partition", p.tp.String(), "attempts", st.attempts, "err", err)
		}
		return false
	}
	// The scrub's marks live on the old log's segments: check them again in the new one
	// before it serves a read, or a bad batch would be served until the scrub's next pass.
	if marks := old.Corrupt(); len(marks) > 0 {
		buf := make([]byte, scrubChunk)
		for _, c := range marks {
			b.recheckMark(b.ctx, p, l, c, buf, func(context.Context, int) error { return nil })
		}
	}
	p.current.Store(l)
	b.resetReplica(p, old, l) // the replica follows the new log: see resetReplica
	p.wake()
	b.logger.Info("log recovered", "partition", p.tp.String(),
		"log_start", l.StartOffset(), "log_end", l.EndOffset(), "end_before", old.EndOffset(),
		"synced_before", old.SyncedOffset(), "attempts", st.attempts,
		"down_for", now.Sub(st.since).Round(time.Millisecond), "err", old.Err())
	return true
}
