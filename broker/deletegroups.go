package broker

// Behavior: DeleteGroups.
//
// Sluice's groups have no membership yet (a group is its committed offsets), so deleting a
// group deletes its committed offsets: one tombstone per partition it committed, appended to
// the group's partition of OffsetsTopic, as a commit is, and answered once they are durable.
// Kafka refuses a group with members (NON_EMPTY_GROUP); with no membership there is none to
// refuse, so once groups have members this is where the check goes. A commit that is appended
// before the tombstones but not yet durable is not in memory when the group is read, and
// survives the deletion: stop the group's consumers first, as Kafka requires.

import (
	"time"

	"github.com/sluicemq/sluice/batch"
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

// deleteGroup writes tombstones for every offset group has committed and calls finish, once,
// with the outcome: NoError once they are durable (and gone from memory), GROUP_ID_NOT_FOUND
// for a group with no committed offset, or the append's error.
func (b *Broker) deleteGroup(group string, finish func(wire.ErrorCode)) {
	s := b.offsets
	if group == "" {
		finish(wire.ErrInvalidGroupID)
		return
	}
	// Held from reading the group's offsets to the append, as a commit holds it.
	s.writeMu.Lock()
	s.mu.RLock()
	var gps []groupPartition
	for gp := range s.offsets {
		if gp.group == group {
			gps = append(gps, gp)
		}
	}
	s.mu.RUnlock()
	if len(gps) == 0 {
		s.writeMu.Unlock()
		finish(wire.ErrGroupIDNotFound)
		return
	}
	p, err := b.coordinatorFor(group) // NOT_COORDINATOR where another broker leads its partition
	if err != nil {
		s.writeMu.Unlock()
		finish(errorCode(err))
		return
	}
	now := time.Now().UnixMilli()
	builder := batch.NewBuilder(batch.DefaultBuilderOptions())
	for _, gp := range gps {
		builder.Append(&batch.Record{Timestamp: now, Key: encodeOffsetKey(gp)}) // null value: deleted
	}
	bt, err := builder.Build()
	var info appendInfo
	l := p.log()
	if err == nil {
		info, err = l.Append(bt, p.leaderEpoch())
	}
	s.writeMu.Unlock()
	if err != nil {
		b.logger.Error("deleting a group's committed offsets", "group", group, "err", err)
		finish(errorCode(err))
		return
	}
	l.OnSynced(info.LastOffset, func(err error) {
		if err != nil {
			finish(errorCode(err))
			return
		}
		s.mu.Lock()
		for _, gp := range gps {
			delete(s.offsets, gp)
		}
		s.mu.Unlock()
		finish(wire.NoError)
	})
}
