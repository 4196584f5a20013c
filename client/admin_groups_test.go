package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// groupBrokerConfig is a test broker that completes a first join at once (no initial rebalance
// delay).
func groupBroker(t *testing.T) string {
	t.Helper()
	cfg := brokertest.Config(t.TempDir(), "127.0.0.1:0")
	cfg.GroupInitialRebalanceDelay = -1
	return brokertest.Open(t, cfg).Addr().String()
}

// formGroup makes a one-member consumer group with raw JoinGroup and SyncGroup calls on conn:
// the member, static as instance, subscribes to topic and is assigned parts of it. It returns
// the member id.
func formGroup(t *testing.T, ctx context.Context, conn *client.Conn, group, instance, topic string, parts ...int32) string {
	t.Helper()
	sub := (&wire.ConsumerSubscription{Version: 1, Topics: []string{topic}}).AppendTo(nil)
	join := &wire.JoinGroupRequest{GroupID: group, GroupInstanceID: &instance, SessionTimeoutMs: 45000, RebalanceTimeoutMs: 5000,
		ProtocolType: wire.ConsumerProtocolType, Protocols: []wire.JoinGroupProtocol{{Name: "range", Metadata: sub}}}
	var jr wire.JoinGroupResponse
	// The first group request of the cluster creates __consumer_offsets: retriable errors until
	// its coordinator has loaded it.
	for {
		jr = wire.JoinGroupResponse{}
		if err := conn.Call(ctx, join, &jr); err != nil {
			t.Fatal(err)
		}
		if jr.ErrorCode == wire.ErrMemberIDRequired {
			join.MemberID = jr.MemberID
			continue
		}
		if jr.ErrorCode != wire.ErrCoordinatorNotAvailable && jr.ErrorCode != wire.ErrCoordinatorLoadInProgress && jr.ErrorCode != wire.ErrNotCoordinator {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("join: no coordinator: %v", jr.ErrorCode)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if jr.ErrorCode != wire.NoError || jr.Leader != jr.MemberID {
		t.Fatalf("join: %v, leader %q, member %q; want the one member to lead", jr.ErrorCode, jr.Leader, jr.MemberID)
	}
	assign := (&wire.ConsumerAssignment{Version: 1, Partitions: []wire.ConsumerTopicPartitions{{Topic: topic, Partitions: parts}}}).AppendTo(nil)
	var sr wire.SyncGroupResponse
	sync := &wire.SyncGroupRequest{GroupID: group, GenerationID: jr.GenerationID, MemberID: jr.MemberID, GroupInstanceID: &instance,
		Assignments: []wire.SyncGroupAssignment{{MemberID: jr.MemberID, Assignment: assign}}}
	if err := conn.Call(ctx, sync, &sr); err != nil || sr.ErrorCode != wire.NoError {
		t.Fatalf("sync: %v %v", err, sr.ErrorCode)
	}
	return jr.MemberID
}

// A group formed on the wire is described at its coordinator with its state, protocol and
// member, whose assignment is decoded; it is listed with its state; its offsets in a topic its
// member subscribes to cannot be deleted (GROUP_SUBSCRIBED_TO_TOPIC), those in another can.
func TestAdminDescribeListAndDeleteGroupOffsets(t *testing.T) {
	addr := groupBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := client.NewAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, spec := range []client.TopicSpec{{Name: "t", Partitions: 2}, {Name: "other", Partitions: 1}} {
		if err := a.CreateTopic(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	t0, t1, o0 := client.TopicPartition{Topic: "t"}, client.TopicPartition{Topic: "t", Partition: 1}, client.TopicPartition{Topic: "other"}
	// Offsets committed while the group has no members (the Admin waits out the coordinator's
	// start: the topic is created by this first group request).
	if err := a.CommitGroupOffsets(ctx, "g", map[client.TopicPartition]int64{t0: 0, o0: 0}); err != nil {
		t.Fatal(err)
	}
	if gs, err := a.ListGroups(ctx); err != nil || !slices.Equal(gs, []client.GroupListing{{ID: "g", State: "Empty"}}) {
		t.Fatalf("list before any member: %+v, %v; want g, Empty, no protocol type", gs, err)
	}

	conn, err := client.Dial(ctx, addr, "raw-member")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	member := formGroup(t, ctx, conn, "g", "inst-1", "t", 0, 1)

	ds, err := a.DescribeGroups(ctx, "g", "nobody")
	if err != nil || len(ds) != 2 {
		t.Fatalf("describe: %+v, %v", ds, err)
	}
	g := ds[0]
	if g.ID != "g" || g.State != "Stable" || g.ProtocolType != wire.ConsumerProtocolType || g.Protocol != "range" || len(g.Members) != 1 {
		t.Fatalf("describe g: %+v; want Stable, consumer, range, one member", g)
	}
	m := g.Members[0]
	if m.ID != member || m.InstanceID != "inst-1" || m.ClientID != "raw-member" || m.Host != "127.0.0.1" || !slices.Equal(m.Assignment, []client.TopicPartition{t0, t1}) {
		t.Errorf("the member: %+v; want %s, inst-1, raw-member, 127.0.0.1, t-0 and t-1", m, member)
	}
	if d := ds[1]; d.ID != "nobody" || d.State != "Dead" || len(d.Members) != 0 {
		t.Errorf("an unknown group: %+v; want Dead with no members", d)
	}
	if gs, err := a.ListGroups(ctx); err != nil || !slices.Equal(gs, []client.GroupListing{{ID: "g", ProtocolType: "consumer", State: "Stable"}}) {
		t.Fatalf("list: %+v, %v; want g, consumer, Stable", gs, err)
	}

	res, err := a.DeleteGroupOffsets(ctx, "g", []client.TopicPartition{o0, t0})
	if err != nil || len(res) != 2 || res[o0] != nil || !errors.Is(res[t0], wire.ErrGroupSubscribedToTopic) {
		t.Fatalf("delete offsets: %v, %v; want other-0 deleted, t-0 GROUP_SUBSCRIBED_TO_TOPIC", res, err)
	}
	if got, err := a.ListGroupOffsets(ctx, "g"); err != nil || len(got) != 1 || got[t0] != 0 {
		t.Fatalf("committed after the delete: %v, %v; want t-0 only", got, err)
	}
	if res, err := a.DeleteGroupOffsets(ctx, "g", []client.TopicPartition{{Topic: "absent"}}); err != nil || !errors.Is(res[client.TopicPartition{Topic: "absent"}], client.ErrUnknownTopic) {
		t.Errorf("delete offsets of a missing topic: %v, %v; want ErrUnknownTopic", res, err)
	}
	if _, err := a.DeleteGroupOffsets(ctx, "nobody", []client.TopicPartition{o0}); !errors.Is(err, wire.ErrGroupIDNotFound) {
		t.Errorf("delete offsets of an unknown group: %v; want GROUP_ID_NOT_FOUND", err)
	}
	if res := a.DeleteGroups(ctx, "g", "nobody"); !errors.Is(res["g"], wire.ErrNonEmptyGroup) || !errors.Is(res["nobody"], wire.ErrGroupIDNotFound) {
		t.Errorf("delete a group with a member and an unknown one: %v; want NON_EMPTY_GROUP and GROUP_ID_NOT_FOUND", res)
	}
	if _, err := a.DescribeGroups(ctx, ""); !errors.Is(err, client.ErrNoGroup) {
		t.Errorf("describe no group: %v; want ErrNoGroup", err)
	}
}
