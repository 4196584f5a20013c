package wire

import (
	"reflect"
	"testing"
)

func TestConsumerProtocolRoundTrip(t *testing.T) {
	tps := []ConsumerTopicPartitions{{Topic: "t", Partitions: []int32{0, 2}}, {Topic: "u", Partitions: []int32{}}}
	for _, s := range []ConsumerSubscription{
		{Version: 0, Topics: []string{"t"}, UserData: []byte{}, GenerationID: -1},
		{Version: 1, Topics: []string{"t", "u"}, UserData: []byte{9}, OwnedPartitions: tps, GenerationID: -1},
		{Version: 2, Topics: []string{"t"}, OwnedPartitions: tps, GenerationID: 7},
		{Version: 3, Topics: []string{"t"}, OwnedPartitions: []ConsumerTopicPartitions{}, GenerationID: 7, RackID: sp("rack-a")},
	} {
		var got ConsumerSubscription
		if err := got.ReadFrom(s.AppendTo(nil)); err != nil {
			t.Fatalf("v%d: %v", s.Version, err)
		}
		// Same encoding, and the fields that are not slices equal (a decoded empty array may
		// be nil).
		if string(got.AppendTo(nil)) != string(s.AppendTo(nil)) || got.GenerationID != s.GenerationID ||
			!reflect.DeepEqual(got.RackID, s.RackID) || len(got.OwnedPartitions) != len(s.OwnedPartitions) {
			t.Errorf("v%d: got %+v, want %+v", s.Version, got, s)
		}
	}
	a := ConsumerAssignment{Version: 1, Partitions: tps, UserData: []byte{1}}
	var got ConsumerAssignment
	if err := got.ReadFrom(a.AppendTo(nil)); err != nil || string(got.AppendTo(nil)) != string(a.AppendTo(nil)) || len(got.Partitions) != 2 {
		t.Fatalf("assignment: %+v %v", got, err)
	}
	if err := got.ReadFrom(nil); err != nil || len(got.Partitions) != 0 {
		t.Fatalf("an empty assignment: %+v %v", got, err)
	}
}

// A newer version's fields after the ones this package knows are ignored, as Kafka's decoders
// do: a v3 reader reads a v4 subscription with a trailing field.
func TestConsumerSubscriptionIgnoresNewerFields(t *testing.T) {
	s := ConsumerSubscription{Version: 3, Topics: []string{"t"}, GenerationID: 2}
	b := s.AppendTo(nil)
	b[1] = 4                        // version 4
	b = append(b, 0, 0, 0, 5, 1, 2) // a field v3 does not know
	var got ConsumerSubscription
	if err := got.ReadFrom(b); err != nil || got.Version != 4 || got.GenerationID != 2 || len(got.Topics) != 1 {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func FuzzConsumerProtocol(f *testing.F) {
	s := ConsumerSubscription{Version: 3, Topics: []string{"t"}, OwnedPartitions: []ConsumerTopicPartitions{{Topic: "t", Partitions: []int32{1}}}, GenerationID: 3}
	f.Add(s.AppendTo(nil))
	a := ConsumerAssignment{Version: 0, Partitions: []ConsumerTopicPartitions{{Topic: "t", Partitions: []int32{0}}}}
	f.Add(a.AppendTo(nil))
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s ConsumerSubscription
		if err := s.ReadFrom(b); err == nil {
			var again ConsumerSubscription
			if err := again.ReadFrom(s.AppendTo(nil)); err != nil {
				t.Fatalf("re-encoded subscription does not decode: %v", err)
			}
		}
		var a ConsumerAssignment
		if err := a.ReadFrom(b); err == nil {
			var again ConsumerAssignment
			if err := again.ReadFrom(a.AppendTo(nil)); err != nil {
				t.Fatalf("re-encoded assignment does not decode: %v", err)
			}
		}
	})
}
