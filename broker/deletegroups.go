package broker

// Behavior: DeleteGroups.
//
// The group's coordinator deletes a group that has no members (others: NON_EMPTY_GROUP, as
// Kafka): one tombstone per committed offset and one for its snapshot, appended to the group's
// partition of OffsetsTopic as a commit is, and answered once they are committed. A commit
// appended before the tombstones but not yet committed is not in memory when the group is
// read, and survives the deletion: stop the group's consumers first, as Kafka requires.

import (
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/group"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
)

// handleDeleteGroups answers DeleteGroups, one group after the other.
func (b *Broker) handleDeleteGroups(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.DeleteGroupsRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := &wire.DeleteGroupsResponse{Results: make([]wire.DeleteGroupsResult, len(req.Groups))}
	pend := c.NewPending()
	// Each group's tombstones are appended in turn; the answer goes once the last append's
	// fate is known (done counts them down).
	remaining := len(req.Groups)
	if remaining == 0 {
		complete(pend, h, resp)
		return pend
	}
	done := make(chan struct{}, len(req.Groups))
	for i, g := range req.Groups {
		resp.Results[i].GroupID = g
		b.deleteGroup(g, func(code wire.ErrorCode) {
			resp.Results[i].ErrorCode = code
			done <- struct{}{}
		})
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for range remaining {
			<-done
		}
		complete(pend, h, resp)
	}()
	return pend
}

// deleteGroup deletes group at its coordinator and calls finish, once, with the outcome:
// NoError once its tombstones are committed, GROUP_ID_NOT_FOUND for a group the coordinator
// does not know, NON_EMPTY_GROUP for one with members, or the refusal or the append's error.
// The group is gone from memory at once (Dead: a request parked on it is answered), as in
// Kafka; should the tombstones fail, a later coordinator's replay brings it back.
func (b *Broker) deleteGroup(id string, finish func(wire.ErrorCode)) {
	if id == "" {
		finish(wire.ErrInvalidGroupID)
		return
	}
	gc := b.groups
	sh, err := gc.shardFor(id)
	if err != nil {
		finish(errorCode(err))
		return
	}
	// Held from reading the group's offsets to the append, as a commit holds it.
	gc.writeMu.Lock()
	defer gc.writeMu.Unlock()
	if !sh.lock() {
		finish(wire.ErrNotCoordinator)
		return
	}
	e := sh.entry(id, false)
	switch {
	case e == nil || e.g.State() == group.Dead:
		sh.mu.Unlock()
		finish(wire.ErrGroupIDNotFound)
		return
	case !e.g.Empty():
		sh.mu.Unlock()
		finish(wire.ErrNonEmptyGroup)
		return
	}
	now := time.Now().UnixMilli()
	recs := make([]*batch.Record, 0, len(e.offsets)+1)
	for tp := range e.offsets {
		recs = append(recs, &batch.Record{Timestamp: now, Key: encodeOffsetKey(groupPartition{id, tp})}) // null value: deleted
	}
	recs = append(recs, &batch.Record{Timestamp: now, Key: group.EncodeKey(id)})
	calls := e.take(e.g.MarkDead())
	calls = append(calls, e.drain(wire.ErrCoordinatorNotAvailable)...)
	delete(sh.groups, id)
	b.appendAcksAll(sh.p, sh.epoch, recs, b.cfg.OffsetsCommitTimeout, func(err error) {
		if err != nil {
			b.logger.Error("deleting a group", "group", id, "err", err)
		}
		finish(errorCode(err))
	})
	sh.mu.Unlock()
	for _, call := range calls {
		call()
	}
}
