package replication

import (
	"slices"

	"github.com/sluicemq/sluice/batch"
)

// Await parks an acks=all produce whose last offset is last (its batch ends at last+1); it is
// released in a later Ready. A wait the high watermark has already passed is released in the
// next Ready too, as is one that cannot succeed: on a replica that does not lead
// (WaitNotLeader), or while the committed ISR is below MinInsync (WaitNotEnoughISR).
func (r *Replica) Await(id WaitID, last batch.Offset) {
	switch {
	case r.role != Leader:
		r.release(id, WaitNotLeader)
	case last < r.hw:
		r.release(id, r.passedResult())
	case len(r.lead.isr) < r.cfg.MinInsync:
		r.release(id, WaitNotEnoughISR)
	default:
		w := r.lead.waits
		// Appends arrive in offset order: the insertion point is almost always the end.
		i := len(w)
		for i > 0 && w[i-1].last > last {
			i--
		}
		r.lead.waits = slices.Insert(w, i, wait{id: id, last: last})
	}
}

// Cancel withdraws a wait (the request timed out); it is not released.
func (r *Replica) Cancel(id WaitID) {
	for i, w := range r.lead.waits {
		if w.id == id {
			r.lead.waits = slices.Delete(r.lead.waits, i, i+1)
			return
		}
	}
}

// passedResult is a wait's result once the high watermark passed it (Kafka's
// Partition.checkEnoughReplicasReachOffset).
func (r *Replica) passedResult() WaitResult {
	if len(r.lead.isr) >= r.cfg.MinInsync {
		return WaitDone
	}
	return WaitNotEnoughISR
}

// releasePassed releases the waits the high watermark has passed.
func (r *Replica) releasePassed() {
	w := r.lead.waits
	n := 0
	for n < len(w) && w[n].last < r.hw {
		n++
	}
	if n == 0 {
		return
	}
	res := r.passedResult()
	for _, x := range w[:n] {
		r.release(x.id, res)
	}
	r.lead.waits = append(w[:0], w[n:]...)
}

// checkMinInsync releases every parked wait WaitNotEnoughISR when the committed ISR is below
// MinInsync.
func (r *Replica) checkMinInsync() {
	if len(r.lead.isr) < r.cfg.MinInsync {
		r.releaseAll(WaitNotEnoughISR)
	}
}

// releaseAll releases every parked wait with res.
func (r *Replica) releaseAll(res WaitResult) {
	for _, x := range r.lead.waits {
		r.release(x.id, res)
	}
	r.lead.waits = r.lead.waits[:0]
}

func (r *Replica) release(id WaitID, res WaitResult) {
	r.rd.Released = append(r.rd.Released, Released{ID: id, Result: res})
}
