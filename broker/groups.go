package broker

// Behavior: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
// OffsetDelete.
//
// Each request for a group is checked first for the coordinator (groupcoord.go: shardFor,
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE), before anything of
// the group is read, then handed to the group's state machine (package group) under its
// shard's lock; what the machine decides is the answer. A JoinGroup or SyncGroup the machine
// parks (the rebalance waits for the other members) is a Pending answered when a later request
// or the ticker completes the rebalance, or when the shard is dropped (NOT_COORDINATOR). The
// request bytes the machine keeps (protocol metadata, assignments) are copied: the connection
// reuses its read buffer.
//
// Beyond the machine, the coordinator refuses a leader's assignment of the "consumer" protocol
// that does not decode (INVALID_REQUEST) or that names a partition the metadata does not have
// (UNKNOWN_TOPIC_OR_PARTITION), with the group's state unchanged: the leader may sync again.

import (
	"bytes"
	"net"
	"sort"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/group"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
)

// msDuration is a request's timeout field as a duration.
func msDuration(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nullable is s, or nil for "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// clientHost is the client's address as a group member's host (Kafka's clientHost).
func clientHost(c *server.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// run calls the callbacks a shard's lock was released for.
func run(calls []func()) {
	for _, call := range calls {
		call()
	}
}

func (b *Broker) handleFindCoordinator(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.FindCoordinatorRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := &wire.FindCoordinatorResponse{NodeID: -1, Port: -1}
	fail := func(code wire.ErrorCode, msg string) *server.Pending {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return respond(c, h, resp)
	}
	switch {
	case req.KeyType != 0:
		return fail(wire.ErrInvalidRequest, "only group coordinators (key type 0) exist: transactions are not built")
	case req.CoordinatorKey == "":
		return fail(wire.ErrInvalidGroupID, "the group id is empty")
	}
	n := b.groups.partitions()
	if n == 0 {
		b.groups.createTopic()
		return fail(wire.ErrCoordinatorNotAvailable, OffsetsTopic+" is being created")
	}
	md := b.ctrl.Metadata()
	pm, ok := partitionMeta(md, topicPartition{OffsetsTopic, partitionFor(req.CoordinatorKey, n)})
	if !ok || pm.Leader == cluster.NoLeader {
		return fail(wire.ErrCoordinatorNotAvailable, "the group's partition of "+OffsetsTopic+" has no leader")
	}
	br, ok := md.Broker(pm.Leader)
	if !ok {
		return fail(wire.ErrCoordinatorNotAvailable, "the coordinator is not registered")
	}
	resp.NodeID, resp.Host, resp.Port = br.ID, br.Host, br.Port
	return respond(c, h, resp)
}

// groupShard is the active shard of id, locked, and its entry (created if create), or the code
// to refuse the request with. On success the caller unlocks sh.mu.
func (b *Broker) groupShard(id string, create bool) (*shard, *groupEntry, wire.ErrorCode) {
	if id == "" {
		return nil, nil, wire.ErrInvalidGroupID
	}
	sh, err := b.groups.shardFor(id)
	if err != nil {
		return nil, nil, errorCode(err)
	}
	if !sh.lock() {
		return nil, nil, wire.ErrNotCoordinator
	}
	return sh, sh.entry(id, create), wire.NoError
}

// memberGroup is groupShard for a request from a member of an existing group: a group the
// coordinator does not know has no such member (UNKNOWN_MEMBER_ID, Kafka's answer).
func (b *Broker) memberGroup(id string) (*shard, *groupEntry, wire.ErrorCode) {
	sh, e, code := b.groupShard(id, false)
	if code == wire.NoError && e == nil {
		sh.mu.Unlock()
		return nil, nil, wire.ErrUnknownMemberID
	}
	return sh, e, code
}

func joinResponse(r *group.JoinResponse) *wire.JoinGroupResponse {
	out := &wire.JoinGroupResponse{
		ErrorCode: r.Err, GenerationID: r.Generation, ProtocolType: nullable(r.ProtocolType), ProtocolName: nullable(r.Protocol),
		Leader: r.Leader, SkipAssignment: r.SkipAssignment, MemberID: r.MemberID,
	}
	if r.Err != wire.NoError && r.Generation == 0 {
		out.GenerationID = -1
	}
	for _, m := range r.Members {
		out.Members = append(out.Members, wire.JoinGroupMember{MemberID: m.MemberID, GroupInstanceID: nullable(m.InstanceID), Metadata: m.Metadata})
	}
	return out
}

func (b *Broker) handleJoinGroup(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.JoinGroupRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	sh, e, code := b.groupShard(req.GroupID, false)
	if code != wire.NoError {
		return respond(c, h, &wire.JoinGroupResponse{ErrorCode: code, GenerationID: -1, MemberID: req.MemberID})
	}
	created := e == nil
	if created {
		e = sh.entry(req.GroupID, true)
	}
	jr := group.JoinRequest{
		MemberID: req.MemberID, InstanceID: orEmpty(req.GroupInstanceID), ClientID: h.ClientID, ClientHost: clientHost(c),
		SessionTimeout: msDuration(req.SessionTimeoutMs), RebalanceTimeout: msDuration(req.RebalanceTimeoutMs),
		ProtocolType: req.ProtocolType, Reason: orEmpty(req.Reason),
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
	}
	// A member's earlier join still parked (its client gave up on it and sent another) is
	// answered by the machine in fx, REBALANCE_IN_PROGRESS; it is first in the member's queue.
	memberID, r, fx := e.g.Join(time.Now(), jr)
	pend := c.NewPending()
	if r == nil {
		e.joins[memberID] = append(e.joins[memberID], func(r *group.JoinResponse) { complete(pend, h, joinResponse(r)) })
	}
	calls := sh.apply(e, fx)
	if created && r != nil && r.Err != wire.NoError && r.Err != wire.ErrMemberIDRequired {
		delete(sh.groups, req.GroupID) // a refused first join leaves no group behind
	}
	sh.mu.Unlock()
	if r != nil {
		complete(pend, h, joinResponse(r))
	}
	run(calls)
	return pend
}

func syncResponse(r *group.SyncResponse) *wire.SyncGroupResponse {
	return &wire.SyncGroupResponse{ErrorCode: r.Err, ProtocolType: nullable(r.ProtocolType), ProtocolName: nullable(r.Protocol), Assignment: r.Assignment}
}

func (b *Broker) handleSyncGroup(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.SyncGroupRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	sh, e, code := b.memberGroup(req.GroupID)
	if code != wire.NoError {
		return respond(c, h, &wire.SyncGroupResponse{ErrorCode: code})
	}
	sr := group.SyncRequest{MemberID: req.MemberID, InstanceID: orEmpty(req.GroupInstanceID), Generation: req.GenerationID,
		ProtocolType: orEmpty(req.ProtocolType), Protocol: orEmpty(req.ProtocolName)}
	leader := req.MemberID == e.g.Leader() && req.GenerationID == e.g.Generation()
	if leader && len(req.Assignments) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.Assignments))
		for _, a := range req.Assignments {
			if code := b.checkAssignment(e.g.ProtocolType(), a.Assignment); code != wire.NoError {
				sh.mu.Unlock()
				return respond(c, h, &wire.SyncGroupResponse{ErrorCode: code})
			}
			sr.Assignments[a.MemberID] = bytes.Clone(a.Assignment)
		}
	}
	r, fx := e.g.Sync(time.Now(), sr)
	pend := c.NewPending()
	if r == nil {
		e.syncs[req.MemberID] = append(e.syncs[req.MemberID], func(r *group.SyncResponse) { complete(pend, h, syncResponse(r)) })
	}
	calls := sh.apply(e, fx)
	sh.mu.Unlock()
	if r != nil {
		complete(pend, h, syncResponse(r))
	}
	run(calls)
	return pend
}

// checkAssignment refuses an assignment of the consumer protocol that does not decode or names
// a partition that does not exist; other protocols' bytes are opaque to the coordinator.
func (b *Broker) checkAssignment(protocolType string, assignment []byte) wire.ErrorCode {
	if protocolType != wire.ConsumerProtocolType || len(assignment) == 0 {
		return wire.NoError
	}
	var a wire.ConsumerAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return wire.ErrInvalidRequest
	}
	md := b.ctrl.Metadata()
	for _, tps := range a.Partitions {
		t, ok := md.Topic(tps.Topic)
		if !ok {
			return wire.ErrUnknownTopicOrPartition
		}
		for _, p := range tps.Partitions {
			if _, ok := t.Partition(p); !ok {
				return wire.ErrUnknownTopicOrPartition
			}
		}
	}
	return wire.NoError
}

func (b *Broker) handleHeartbeat(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.HeartbeatRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	sh, e, code := b.memberGroup(req.GroupID)
	if code != wire.NoError {
		return respond(c, h, &wire.HeartbeatResponse{ErrorCode: code})
	}
	code, fx := e.g.Heartbeat(time.Now(), req.MemberID, orEmpty(req.GroupInstanceID), req.GenerationID)
	calls := sh.apply(e, fx)
	sh.mu.Unlock()
	run(calls)
	return respond(c, h, &wire.HeartbeatResponse{ErrorCode: code})
}

func (b *Broker) handleLeaveGroup(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.LeaveGroupRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := &wire.LeaveGroupResponse{}
	sh, e, code := b.memberGroup(req.GroupID)
	if code != wire.NoError && code != wire.ErrUnknownMemberID {
		resp.ErrorCode = code
		return respond(c, h, resp)
	}
	var calls []func()
	now := time.Now()
	for _, m := range req.Members {
		res := wire.LeaveGroupMemberResult{MemberID: m.MemberID, GroupInstanceID: m.GroupInstanceID, ErrorCode: code}
		if e != nil {
			var fx group.Effects
			res.ErrorCode, fx = e.g.Leave(now, m.MemberID, orEmpty(m.GroupInstanceID))
			calls = append(calls, sh.apply(e, fx)...)
		}
		resp.Members = append(resp.Members, res)
	}
	if e != nil {
		sh.mu.Unlock()
	}
	if len(resp.Members) == 1 {
		resp.ErrorCode = resp.Members[0].ErrorCode // what a one-member (v0-style) leave reads
	}
	run(calls)
	return respond(c, h, resp)
}

func (b *Broker) handleDescribeGroups(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.DescribeGroupsRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := &wire.DescribeGroupsResponse{}
	for _, id := range req.Groups {
		out := wire.DescribedGroup{GroupID: id}
		sh, e, code := b.groupShard(id, false)
		switch {
		case code != wire.NoError:
			out.ErrorCode = code
		case e == nil:
			sh.mu.Unlock()
			out.GroupState = group.Dead.String() // Kafka's answer for a group it does not know
		default:
			d := e.g.Describe()
			sh.mu.Unlock()
			out.GroupState, out.ProtocolType, out.ProtocolData = d.State.String(), d.ProtocolType, d.Protocol
			for _, m := range d.Members {
				out.Members = append(out.Members, wire.DescribedGroupMember{
					MemberID: m.MemberID, GroupInstanceID: nullable(m.InstanceID), ClientID: m.ClientID, ClientHost: m.ClientHost,
					MemberMetadata: m.Metadata, MemberAssignment: m.Assignment,
				})
			}
		}
		resp.Groups = append(resp.Groups, out)
	}
	return respond(c, h, resp)
}

// subscribedTopics is the topics a consumer-protocol group's members subscribe to, nil for a
// group with no members; ok is false for a non-empty group of another protocol type, whose
// subscriptions the coordinator cannot read. Call with the shard's mu held.
func subscribedTopics(g *group.Group) (topics map[string]bool, ok bool) {
	d := g.Describe()
	if len(d.Members) == 0 {
		return nil, true
	}
	if d.ProtocolType != wire.ConsumerProtocolType {
		return nil, false
	}
	topics = map[string]bool{}
	for _, m := range d.Members {
		var s wire.ConsumerSubscription
		if err := s.ReadFrom(m.Metadata); err != nil {
			continue
		}
		for _, t := range s.Topics {
			topics[t] = true
		}
	}
	return topics, true
}

func (b *Broker) handleOffsetDelete(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.OffsetDeleteRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := &wire.OffsetDeleteResponse{}
	gc := b.groups
	gc.writeMu.Lock() // as a commit: against the forgetting of deleted topics
	defer gc.writeMu.Unlock()
	sh, e, code := b.groupShard(req.GroupID, false)
	if code == wire.NoError && (e == nil || e.g.State() == group.Dead) {
		sh.mu.Unlock()
		code = wire.ErrGroupIDNotFound
	}
	if code != wire.NoError {
		resp.ErrorCode = code
		return respond(c, h, resp)
	}
	subscribed, readable := subscribedTopics(e.g)
	if !readable {
		sh.mu.Unlock()
		resp.ErrorCode = wire.ErrNonEmptyGroup
		return respond(c, h, resp)
	}
	md := b.ctrl.Metadata()
	now := time.Now().UnixMilli()
	var recs []*batch.Record
	for _, t := range req.Topics {
		out := wire.OffsetDeleteResponseTopic{Topic: t.Topic}
		mt, topicOK := md.Topic(t.Topic)
		for _, p := range t.Partitions {
			res := wire.PartitionResult{Partition: p}
			_, partOK := mt.Partition(p)
			tp := topicPartition{t.Topic, p}
			switch {
			case !topicOK || !partOK:
				res.ErrorCode = wire.ErrUnknownTopicOrPartition
			case subscribed[t.Topic]:
				res.ErrorCode = wire.ErrGroupSubscribedToTopic
			default:
				if _, ok := e.offsets[tp]; ok {
					delete(e.offsets, tp)
					recs = append(recs, &batch.Record{Timestamp: now, Key: encodeOffsetKey(groupPartition{req.GroupID, tp})})
				}
			}
			out.Partitions = append(out.Partitions, res)
		}
		resp.Topics = append(resp.Topics, out)
	}
	sh.mu.Unlock()
	if len(recs) == 0 {
		return respond(c, h, resp)
	}
	pend := c.NewPending()
	b.appendAcksAll(sh.p, sh.epoch, recs, b.cfg.OffsetsCommitTimeout, func(err error) {
		if err != nil {
			// The offsets are gone from memory but not from the log: a later coordinator
			// would replay them. Say so; the client may delete again.
			resp.ErrorCode = errorCode(err)
		}
		complete(pend, h, resp)
	})
	return pend
}

// handleListGroups answers ListGroups: every group this broker coordinates, with its state
// (v1), filtered by StatesFilter (v1; empty: all), sorted by id (a client lists every broker's,
// as Kafka's does). While a shard loads, the groups of the others come with
// COORDINATOR_LOAD_IN_PROGRESS, as Kafka's: the list is not complete yet.
func (b *Broker) handleListGroups(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	req := wire.ListGroupsRequest{Version: h.APIVersion}
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	want := map[string]bool{}
	for _, s := range req.StatesFilter {
		want[s] = true
	}
	resp := &wire.ListGroupsResponse{Version: h.APIVersion}
	for _, sh := range b.groups.activeShards() {
		if !sh.lock() {
			sh.mu.Lock()
			if sh.state == shardLoading {
				resp.ErrorCode = wire.ErrCoordinatorLoadInProgress
			}
			sh.mu.Unlock()
			continue
		}
		for id, e := range sh.groups {
			st := e.g.State()
			if st == group.Dead || (len(want) > 0 && !want[st.String()]) {
				continue
			}
			resp.Groups = append(resp.Groups, wire.ListedGroup{GroupID: id, ProtocolType: e.g.ProtocolType(), GroupState: st.String()})
		}
		sh.mu.Unlock()
	}
	sort.Slice(resp.Groups, func(i, j int) bool { return resp.Groups[i].GroupID < resp.Groups[j].GroupID })
	return respond(c, h, resp)
}
