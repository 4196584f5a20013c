package client

import (
	"testing"

	"github.com/sluicemq/sluice/net/wire"
)

// FuzzDescribedGroup: whatever assignment bytes a coordinator describes a member with, reading
// them never panics, and a consumer assignment that decodes lists exactly its partitions.
func FuzzDescribedGroup(f *testing.F) {
	good := (&wire.ConsumerAssignment{Version: 1, Partitions: []wire.ConsumerTopicPartitions{{Topic: "t", Partitions: []int32{1, 0}}, {Topic: "a", Partitions: []int32{2}}}}).AppendTo(nil)
	f.Add(good, wire.ConsumerProtocolType)
	f.Add(good[:len(good)-3], wire.ConsumerProtocolType)
	f.Add([]byte{0, 3, 0, 0, 0, 1, 0, 1}, wire.ConsumerProtocolType)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, "connect")
	f.Add([]byte{}, wire.ConsumerProtocolType)
	f.Fuzz(func(t *testing.T, assignment []byte, protocolType string) {
		g := wire.DescribedGroup{GroupID: "g", ProtocolType: protocolType, Members: []wire.DescribedGroupMember{{MemberID: "m", MemberAssignment: assignment}}}
		d, err := describedGroup(&g)
		if len(d.Members) != 1 {
			t.Fatalf("%d members, want 1", len(d.Members))
		}
		var ca wire.ConsumerAssignment
		if protocolType != wire.ConsumerProtocolType || len(assignment) == 0 || ca.ReadFrom(assignment) != nil {
			if d.Members[0].Assignment != nil {
				t.Fatalf("an assignment %v read from bytes that are not one", d.Members[0].Assignment)
			}
			return
		}
		if err != nil {
			t.Fatalf("a decodable assignment: %v", err)
		}
		n := 0
		for _, tp := range ca.Partitions {
			n += len(tp.Partitions)
		}
		if len(d.Members[0].Assignment) != n {
			t.Fatalf("%d partitions, want %d", len(d.Members[0].Assignment), n)
		}
	})
}
