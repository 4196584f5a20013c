package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// joinRaw makes conn a member of group with raw JoinGroup and SyncGroup calls: a static member
// (instance) of the consumer protocol subscribed to topic, assigned parts of it, the group's
// only member and so its leader. It returns the member id.
func joinRaw(t *testing.T, ctx context.Context, conn *client.Conn, group, instance, topic string, parts ...int32) string {
	t.Helper()
	sub := (&wire.ConsumerSubscription{Version: 1, Topics: []string{topic}}).AppendTo(nil)
	join := &wire.JoinGroupRequest{GroupID: group, GroupInstanceID: &instance, SessionTimeoutMs: 45000, RebalanceTimeoutMs: 5000,
		ProtocolType: wire.ConsumerProtocolType, Protocols: []wire.JoinGroupProtocol{{Name: "range", Metadata: sub}}}
	var jr wire.JoinGroupResponse
	for {
		jr = wire.JoinGroupResponse{}
		if err := conn.Call(ctx, join, &jr); err != nil {
			t.Fatal(err)
		}
		switch jr.ErrorCode {
		case wire.ErrMemberIDRequired:
			join.MemberID = jr.MemberID
			continue
		case wire.ErrCoordinatorNotAvailable, wire.ErrCoordinatorLoadInProgress, wire.ErrNotCoordinator:
			select { // the first group request creates __consumer_offsets
			case <-ctx.Done():
				t.Fatalf("join: no coordinator: %v", jr.ErrorCode)
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		break
	}
	if jr.ErrorCode != wire.NoError {
		t.Fatalf("join: %v", jr.ErrorCode)
	}
	assign := (&wire.ConsumerAssignment{Version: 1, Partitions: []wire.ConsumerTopicPartitions{{Topic: topic, Partitions: parts}}}).AppendTo(nil)
	var sr wire.SyncGroupResponse
	if err := conn.Call(ctx, &wire.SyncGroupRequest{GroupID: group, GenerationID: jr.GenerationID, MemberID: jr.MemberID, GroupInstanceID: &instance,
		Assignments: []wire.SyncGroupAssignment{{MemberID: jr.MemberID, Assignment: assign}}}, &sr); err != nil || sr.ErrorCode != wire.NoError {
		t.Fatalf("sync: %v %v", err, sr.ErrorCode)
	}
	return jr.MemberID
}

// group list shows a group's protocol type and state; describe shows its member with its
// assignment, and each partition with a commit or an owner, '-' where it has none;
// delete-offsets refuses the topic the member subscribes to and deletes another's.
func TestGroupMembersDescribeAndDeleteOffsets(t *testing.T) {
	cfg := brokertest.Config(t.TempDir(), "127.0.0.1:0")
	cfg.GroupInitialRebalanceDelay = -1
	e := &consumeEnv{t: t, b: brokertest.Open(t, cfg)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.ctx = ctx
	conn, err := client.Dial(ctx, e.b.Addr().String(), "raw-member")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e.conn = conn
	e.topic("sub", 3)
	e.topic("old", 1)
	e.produce("sub", 0, 1_000, "a", "b", "c")
	e.produce("old", 0, 1_000, "x", "y")
	a, err := client.NewAdmin(ctx, e.b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.CommitGroupOffsets(ctx, "g", map[client.TopicPartition]int64{{Topic: "sub"}: 1, {Topic: "old"}: 2}); err != nil {
		t.Fatal(err)
	}
	member := joinRaw(t, ctx, conn, "g", "inst-1", "sub", 0, 1)
	run := func(args ...string) (string, string, error) { return e.runCmd(groupCmd(), args...) }
	rows := func(section string) []string {
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(section), "\n") {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
		return out
	}
	equal := func(got []string, want ...string) bool { return strings.Join(got, "\n") == strings.Join(want, "\n") }

	if out, _, err := run("list"); err != nil || !equal(rows(out), "GROUP PROTOCOL-TYPE STATE", "g consumer Stable") {
		t.Fatalf("list: %q, %v", out, err)
	}
	out, _, err := run("describe", "g")
	sections := strings.Split(out, "\n\n")
	if err != nil || len(sections) != 3 {
		t.Fatalf("describe: %q, %v; want three tables", out, err)
	}
	if got := rows(sections[0]); !equal(got, "GROUP PROTOCOL-TYPE PROTOCOL STATE #MEMBERS", "g consumer range Stable 1") {
		t.Errorf("describe's group: %q", got)
	}
	if got := rows(sections[1]); !equal(got, "MEMBER-ID INSTANCE-ID CLIENT-ID HOST ASSIGNMENT", member+" inst-1 raw-member 127.0.0.1 sub(0,1)") {
		t.Errorf("describe's members: %q", got)
	}
	if got := rows(sections[2]); !equal(got,
		"GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID",
		"g old 0 2 2 0 - - -", // committed, no owner
		"g sub 0 1 3 2 "+member+" 127.0.0.1 raw-member",
		"g sub 1 - 0 - "+member+" 127.0.0.1 raw-member", // owned, nothing committed
	) {
		t.Errorf("describe's partitions: %q", got)
	}
	if out, _, err := run("describe", "g", "--topic", "old"); err != nil || !strings.HasSuffix(strings.Join(rows(out), "\n"), "\ng old 0 2 2 0 - - -") {
		t.Errorf("describe --topic old: %q, %v", out, err)
	}

	out, _, err = run("delete-offsets", "g", "--topic", "sub", "--partition", "0")
	out, _, _ = strings.Cut(out, "Usage:") // cobra's, on an error, without the root command's SilenceUsage
	if err == nil || !strings.Contains(err.Error(), "GROUP_SUBSCRIBED_TO_TOPIC") || !equal(rows(out), "TOPIC PARTITION STATUS", "sub 0 Error: GROUP_SUBSCRIBED_TO_TOPIC") {
		t.Errorf("delete-offsets of the subscribed topic: %q, %v", out, err)
	}
	out, _, err = run("delete-offsets", "g", "--topic", "old")
	if err != nil || !equal(rows(out), "Request succeeded for deleting offsets of topic old from group g.", "", "TOPIC PARTITION STATUS", "old 0 Successful") {
		t.Errorf("delete-offsets of another topic: %q, %v", out, err)
	}
	if got, err := a.ListGroupOffsets(ctx, "g"); err != nil || len(got) != 1 || got[client.TopicPartition{Topic: "sub"}] != 1 {
		t.Errorf("committed after delete-offsets: %v, %v; want sub-0 only", got, err)
	}
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"delete-offsets", "g"}, "--topic is required"},
		{[]string{"delete-offsets", "g", "--topic", "old", "--partition", "3"}, "--partition 3: topic old has partitions 0 to 0"},
		{[]string{"delete-offsets", "nobody", "--topic", "old"}, "GROUP_ID_NOT_FOUND"},
		{[]string{"describe", "nobody"}, "consumer group nobody does not exist"},
		{[]string{"delete", "g"}, "NON_EMPTY_GROUP"},
	} {
		if _, _, err := run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: %v; want an error saying %q", tc.args, err, tc.wantErr)
		}
	}
}
