package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/coordinator"
	"github.com/sluicemq/sluice/net/wire"
)

// GroupListing is one consumer group as ListGroups finds it.
type GroupListing struct {
	ID string
	// ProtocolType is "consumer" for a group of Consumers, "" for one that only commits offsets.
	ProtocolType string
	// State is Empty, PreparingRebalance, CompletingRebalance or Stable; "" from a broker that
	// does not answer ListGroups v1.
	State string
}

// GroupDescription is a group as its coordinator describes it (Kafka's ConsumerGroupDescription).
type GroupDescription struct {
	ID string
	// State is Empty, PreparingRebalance, CompletingRebalance, Stable, or Dead for a group the
	// coordinator does not know.
	State        string
	ProtocolType string
	// Protocol is the protocol the group chose: the assignor's name for a consumer group.
	Protocol string
	Members  []GroupMember
}

// GroupMember is a member of a group.
type GroupMember struct {
	ID         string
	InstanceID string // group.instance.id of a static member, "" for a dynamic one
	ClientID   string
	Host       string
	// Assignment is the partitions the member was given, sorted, decoded when the group's
	// protocol type is "consumer" (nil for other protocols and before the group synced).
	Assignment []TopicPartition
}

// Bounds of the backoff between tries of a group request whose coordinator is moving or
// loading.
const (
	groupRetryBase    = 50 * time.Millisecond
	groupRetryCeiling = time.Second
)

// coordinatorRetriable reports whether code says the group's coordinator is elsewhere, not yet
// elected or still replaying: the request is retried after a backoff.
func coordinatorRetriable(code wire.ErrorCode) bool {
	return code == wire.ErrNotCoordinator || code == wire.ErrCoordinatorLoadInProgress || code == wire.ErrCoordinatorNotAvailable
}

// groupCall sends req to group's coordinator and reads resp; code reads the answer's error code
// that says where the coordinator is. The coordinator is the leader of the group's partition of
// __consumer_offsets (coordinator.Partition), found in the metadata of the Admin's broker; the
// Admin's broker itself when the topic or its leader is not known yet (it answers
// COORDINATOR_NOT_AVAILABLE and creates the topic). NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS and COORDINATOR_NOT_AVAILABLE are retried, with a backoff, until
// ctx ends (DefaultAPITimeout without a deadline); the last answer is then in resp, and the
// error wraps ctx's.
func (a *Admin) groupCall(ctx context.Context, group string, req wire.Request, resp wire.Response, code func() wire.ErrorCode) error {
	ctx, cancel := apiContext(ctx, a.cfg.DefaultAPITimeout)
	defer cancel()
	for failures := 1; ; failures++ {
		conn, release, err := a.coordinatorConn(ctx, group)
		if err == nil {
			err = conn.callWithin(ctx, a.cfg.RequestTimeout, req, resp)
			release()
			if err == nil && !coordinatorRetriable(code()) {
				return nil
			}
		}
		if err == nil {
			err = codeErr(code(), nil)
		}
		t := time.NewTimer(retryBackoff(groupRetryBase, groupRetryCeiling, failures, rand.Float64()))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("coordinator of group %.300q: %w (%w)", group, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// coordinatorConn returns a connection to group's coordinator, and what to call when done with
// it (it closes a connection dialled for the call).
func (a *Admin) coordinatorConn(ctx context.Context, group string) (*Conn, func(), error) {
	var md wire.MetadataResponse
	if err := a.call(ctx, &wire.MetadataRequest{Topics: []string{offsetsTopic}}, &md); err != nil {
		return nil, nil, err
	}
	leader := int32(-1)
	if t := slices.IndexFunc(md.Topics, func(mt wire.MetadataTopic) bool { return mt.Topic == offsetsTopic }); t >= 0 && md.Topics[t].ErrorCode == wire.NoError {
		ps := md.Topics[t].Partitions
		p := coordinator.Partition(group, int32(len(ps)))
		if i := slices.IndexFunc(ps, func(mp wire.MetadataPartition) bool { return mp.Partition == p }); i >= 0 {
			leader = ps[i].Leader
		}
	}
	if leader < 0 {
		conn, err := a.connection(ctx)
		return conn, func() {}, err
	}
	return a.brokerConn(ctx, md.Brokers, leader)
}

// brokerConn returns a connection to broker id, found in brokers: the Admin's own if that is
// the broker, else one dialled for the caller, which release closes.
func (a *Admin) brokerConn(ctx context.Context, brokers []wire.MetadataBroker, id int32) (*Conn, func(), error) {
	i := slices.IndexFunc(brokers, func(b wire.MetadataBroker) bool { return b.NodeID == id })
	if i < 0 {
		return nil, nil, fmt.Errorf("broker %d is not in the metadata", id)
	}
	b := brokers[i]
	own, err := a.connection(ctx)
	if err != nil {
		return nil, nil, err
	}
	addr := b.Host + ":" + strconv.Itoa(int(b.Port))
	if strings.HasPrefix(own.Addr(), "unix:") && b.UnixPath != "" {
		addr = "unix://" + b.UnixPath
	}
	if sameBroker(own.Addr(), addr, b) {
		return own, func() {}, nil
	}
	c, err := dialBounded(ctx, a.cfg.Dial, addr, a.cfg.ClientID, a.cfg.RequestTimeout)
	if err != nil {
		return nil, nil, err
	}
	return c, func() { _ = c.Close() }, nil
}

// ListGroups returns the consumer groups of the cluster, sorted by id, with each one's protocol
// type and state (Kafka's Admin.listConsumerGroups): every broker answers with the groups it
// coordinates, so every broker in the metadata is asked. A group is known while it has members
// or a committed offset. A broker that cannot be asked is named in the error, joined one per
// broker; the groups of the others are returned.
func (a *Admin) ListGroups(ctx context.Context) ([]GroupListing, error) {
	ctx, cancel := apiContext(ctx, a.cfg.DefaultAPITimeout)
	defer cancel()
	var md wire.MetadataResponse
	if err := a.call(ctx, &wire.MetadataRequest{Topics: []string{}}, &md); err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	ids := make([]int32, 0, len(md.Brokers))
	for _, b := range md.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	seen := map[string]GroupListing{}
	var errs []error
	listAt := func(conn *Conn) error {
		v := min(conn.Version(wire.ListGroups), 1)
		resp := wire.ListGroupsResponse{Version: v}
		if err := conn.callWithin(ctx, a.cfg.RequestTimeout, &wire.ListGroupsRequest{Version: v}, &resp); err != nil {
			return err
		}
		if err := codeErr(resp.ErrorCode, nil); err != nil {
			return err
		}
		for _, g := range resp.Groups {
			seen[g.GroupID] = GroupListing{ID: g.GroupID, ProtocolType: g.ProtocolType, State: g.GroupState}
		}
		return nil
	}
	if len(ids) == 0 {
		conn, err := a.connection(ctx)
		if err == nil {
			err = listAt(conn)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list groups: %w", err))
		}
	}
	for _, id := range ids {
		conn, release, err := a.brokerConn(ctx, md.Brokers, id)
		if err == nil {
			err = listAt(conn)
			release()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list groups at broker %d: %w", id, err))
		}
	}
	out := make([]GroupListing, 0, len(seen))
	for _, g := range seen {
		out = append(out, g)
	}
	slices.SortFunc(out, func(x, y GroupListing) int { return strings.Compare(x.ID, y.ID) })
	return out, errors.Join(errs...)
}

// DescribeGroups describes each group at its coordinator (Kafka's
// Admin.describeConsumerGroups), in the order asked: its state, protocol and members, with each
// member's assignment decoded for a consumer group. A group the coordinator does not know is
// described Dead, with no members, as Kafka does. The groups that could not be described are
// left out, and the error joins one per group, naming it and wrapping the broker's code.
func (a *Admin) DescribeGroups(ctx context.Context, groups ...string) ([]GroupDescription, error) {
	ctx, cancel := apiContext(ctx, a.cfg.DefaultAPITimeout)
	defer cancel()
	out := make([]GroupDescription, 0, len(groups))
	var errs []error
	for _, group := range groups {
		op := fmt.Sprintf("describe group %.300q", group)
		if group == "" {
			errs = append(errs, fmt.Errorf("%s: %w", op, ErrNoGroup))
			continue
		}
		var resp wire.DescribeGroupsResponse
		code := func() wire.ErrorCode {
			if len(resp.Groups) != 1 {
				return wire.NoError
			}
			return resp.Groups[0].ErrorCode
		}
		if err := a.groupCall(ctx, group, &wire.DescribeGroupsRequest{Groups: []string{group}}, &resp, code); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", op, err))
			continue
		}
		if len(resp.Groups) != 1 || resp.Groups[0].GroupID != group {
			errs = append(errs, fmt.Errorf("%s: %d groups in the answer for 1", op, len(resp.Groups)))
			continue
		}
		g := resp.Groups[0]
		if err := resultErr(op, g.ErrorCode, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		d, err := describedGroup(&g)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", op, err))
		}
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}

// describedGroup reads a DescribeGroups answer for one group. A member assignment that does not
// decode leaves that member's Assignment nil, and the error names the member.
func describedGroup(g *wire.DescribedGroup) (GroupDescription, error) {
	d := GroupDescription{ID: g.GroupID, State: g.GroupState, ProtocolType: g.ProtocolType, Protocol: g.ProtocolData}
	var errs []error
	for _, m := range g.Members {
		gm := GroupMember{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if m.GroupInstanceID != nil {
			gm.InstanceID = *m.GroupInstanceID
		}
		if g.ProtocolType == wire.ConsumerProtocolType && len(m.MemberAssignment) > 0 {
			var ca wire.ConsumerAssignment
			if err := ca.ReadFrom(m.MemberAssignment); err != nil {
				errs = append(errs, fmt.Errorf("member %.300q: assignment: %w", m.MemberID, err))
			} else {
				for _, t := range ca.Partitions {
					for _, p := range t.Partitions {
						gm.Assignment = append(gm.Assignment, TopicPartition{t.Topic, p})
					}
				}
				sortTopicPartitions(gm.Assignment)
			}
		}
		d.Members = append(d.Members, gm)
	}
	return d, errors.Join(errs...)
}

// DeleteGroupOffsets deletes group's committed offsets in tps (Kafka's
// Admin.deleteConsumerGroupOffsets): the group's consumers then start those partitions where
// auto.offset.reset says. The coordinator refuses a topic the group's members subscribe to
// (wire.ErrGroupSubscribedToTopic) and a partition that does not exist (ErrUnknownTopic).
// results has every partition asked, each with nil (deleted, or nothing was committed) or its
// error; err is for the whole request: the group unknown (wire.ErrGroupIDNotFound), a
// non-consumer group with members (wire.ErrNonEmptyGroup), the coordinator not reached.
func (a *Admin) DeleteGroupOffsets(ctx context.Context, group string, tps []TopicPartition) (results map[TopicPartition]error, err error) {
	op := fmt.Sprintf("delete offsets of group %.300q", group)
	if group == "" {
		return nil, fmt.Errorf("%s: %w", op, ErrNoGroup)
	}
	sorted := slices.Clone(tps)
	sortTopicPartitions(sorted)
	sorted = slices.Compact(sorted)
	if len(sorted) == 0 {
		return map[TopicPartition]error{}, nil
	}
	req := &wire.OffsetDeleteRequest{GroupID: group}
	for _, tp := range sorted {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
			req.Topics = append(req.Topics, wire.OffsetDeleteRequestTopic{Topic: tp.Topic})
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	var resp wire.OffsetDeleteResponse
	if err := a.groupCall(ctx, group, req, &resp, func() wire.ErrorCode { return resp.ErrorCode }); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := resultErr(op, resp.ErrorCode, nil); err != nil {
		return nil, err
	}
	answered := map[TopicPartition]wire.ErrorCode{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			answered[TopicPartition{t.Topic, p.Partition}] = p.ErrorCode
		}
	}
	results = make(map[TopicPartition]error, len(sorted))
	for _, tp := range sorted {
		code, ok := answered[tp]
		switch {
		case !ok:
			results[tp] = fmt.Errorf("%s: %s: no answer from the broker", op, tp)
		default:
			results[tp] = resultErr(fmt.Sprintf("%s: %s", op, tp), code, nil)
		}
	}
	return results, nil
}

// groupCode is the error code of an offset request's answer that says where the coordinator
// is: the request's, or the first partition's that is one of those groupCall retries.
func groupCode(resp wire.Response) wire.ErrorCode {
	switch r := resp.(type) {
	case *wire.OffsetFetchResponse:
		if r.ErrorCode != wire.NoError {
			return r.ErrorCode
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if coordinatorRetriable(p.ErrorCode) {
					return p.ErrorCode
				}
			}
		}
	case *wire.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if coordinatorRetriable(p.ErrorCode) {
					return p.ErrorCode
				}
			}
		}
	}
	return wire.NoError
}

// DeleteGroups deletes each group at its coordinator (Kafka's Admin.deleteConsumerGroups): its
// committed offsets and its state, so that its consumers start over where auto.offset.reset
// says. The coordinator refuses a group with members (wire.ErrNonEmptyGroup) and one it does
// not know (wire.ErrGroupIDNotFound). The result has every group asked, with nil (deleted) or
// its error, naming it.
func (a *Admin) DeleteGroups(ctx context.Context, groups ...string) map[string]error {
	ctx, cancel := apiContext(ctx, a.cfg.DefaultAPITimeout)
	defer cancel()
	out := make(map[string]error, len(groups))
	for _, group := range groups {
		op := fmt.Sprintf("delete group %.300q", group)
		if group == "" {
			out[group] = fmt.Errorf("%s: %w", op, ErrNoGroup)
			continue
		}
		var resp wire.DeleteGroupsResponse
		code := func() wire.ErrorCode {
			if len(resp.Results) != 1 {
				return wire.NoError
			}
			return resp.Results[0].ErrorCode
		}
		switch err := a.groupCall(ctx, group, &wire.DeleteGroupsRequest{Groups: []string{group}}, &resp, code); {
		case err != nil:
			out[group] = fmt.Errorf("%s: %w", op, err)
		case len(resp.Results) != 1 || resp.Results[0].GroupID != group:
			out[group] = fmt.Errorf("%s: %d results for 1 group", op, len(resp.Results))
		default:
			out[group] = resultErr(op, resp.Results[0].ErrorCode, nil)
		}
	}
	return out
}
