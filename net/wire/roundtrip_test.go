package wire

import (
	"bytes"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			enc := s.msg.AppendTo(nil)
			got := fresh(s.msg)
			if err := got.ReadFrom(enc); err != nil {
				t.Fatalf("ReadFrom: %v", err)
			}
			if !reflect.DeepEqual(got, s.msg) {
				t.Fatalf("round trip mismatch\n got %+v\nwant %+v", got, s.msg)
			}
			// Appending must not depend on what dst already holds.
			prefix := []byte("prefix")
			if enc2 := s.msg.AppendTo(prefix); !bytes.Equal(enc2[len(prefix):], enc) || string(enc2[:len(prefix)]) != "prefix" {
				t.Fatal("AppendTo with a non-empty dst differs")
			}
		})
	}
}

// TestReadFromReuse decodes every sample of a type into one reused value in
// turn and checks each result equals a fresh decode: ReadFrom must
// overwrite every field, whatever the previous message left behind.
func TestReadFromReuse(t *testing.T) {
	byType := map[reflect.Type][]sample{}
	for _, s := range samples() {
		ty := reflect.TypeOf(s.msg)
		byType[ty] = append(byType[ty], s)
	}
	for ty, ss := range byType {
		reused := fresh(ss[0].msg)
		// Twice round, so every sample follows every other shape.
		for range 2 {
			for _, s := range ss {
				setVersion(reused, s.msg)
				if err := reused.ReadFrom(s.msg.AppendTo(nil)); err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				want := fresh(s.msg)
				if err := want.ReadFrom(s.msg.AppendTo(nil)); err != nil {
					t.Fatal(err)
				}
				if !equalIgnoringEmpty(reused, want) {
					t.Fatalf("%v: reused decode of %s\n got %+v\nwant %+v", ty, s.name, reused, want)
				}
			}
		}
	}
}

// equalIgnoringEmpty compares two messages by their encoding: a reused value
// may hold an empty non-nil slice where a fresh one holds nil for a
// non-nullable array, which encodes identically.
func equalIgnoringEmpty(a, b Message) bool {
	return bytes.Equal(a.AppendTo(nil), b.AppendTo(nil))
}

// TestNullVsEmpty pins that null and empty differ on the wire and survive
// decoding for each nullable kind.
func TestNullVsEmpty(t *testing.T) {
	cases := []struct {
		name        string
		null, empty Message
	}{
		{"nullable string", &ProduceRequest{TransactionalID: nil}, &ProduceRequest{TransactionalID: sp("")}},
		{"nullable array", &MetadataRequest{Topics: nil}, &MetadataRequest{Topics: []string{}}},
		{"nullable struct array", &OffsetFetchRequest{Topics: nil}, &OffsetFetchRequest{Topics: []OffsetFetchRequestTopic{}}},
		{"bytes", &FetchResponse{Topics: []FetchResponseTopic{{Partitions: []FetchResponsePartition{{CurrentLeader: NoLeaderHint, Records: nil}}}}},
			&FetchResponse{Topics: []FetchResponseTopic{{Partitions: []FetchResponsePartition{{CurrentLeader: NoLeaderHint, Records: []byte{}}}}}}},
	}
	for _, c := range cases {
		n, e := c.null.AppendTo(nil), c.empty.AppendTo(nil)
		if bytes.Equal(n, e) {
			t.Errorf("%s: null and empty encode the same", c.name)
		}
		gn, ge := fresh(c.null), fresh(c.empty)
		if gn.ReadFrom(n) != nil || ge.ReadFrom(e) != nil {
			t.Fatalf("%s: decode failed", c.name)
		}
		if !reflect.DeepEqual(gn, c.null) || !reflect.DeepEqual(ge, c.empty) {
			t.Errorf("%s: null/empty lost in decoding: %+v / %+v", c.name, gn, ge)
		}
	}
}

// TestMinElementSizes checks each declared minimum element size against the
// encoding of the element's zero value (which is the smallest encoding). A
// minimum larger than the truth would reject valid input; smaller would
// weaken the allocation bound.
func TestMinElementSizes(t *testing.T) {
	type enc interface{ appendTo([]byte) []byte }
	cases := []struct {
		e   enc
		min int
	}{
		{&APIVersionRange{}, minAPIVersionRange},
		{&MetadataBroker{}, minMetadataBroker},
		{&MetadataTopic{}, minMetadataTopic},
		{&MetadataPartition{}, minMetadataPartition},
		{&ConfigEntry{}, minConfigEntry},
		{&CreateTopicsRequestTopic{}, minCreateTopicsRequestTopic},
		{&CreateTopicsAssignment{}, minCreateTopicsAssignment},
		{&TopicResult{}, minTopicResult},
		{&DescribeConfigsResource{}, minDescribeConfigsResource},
		{&DescribeConfigsResult{}, minDescribeConfigsResult},
		{&DescribeConfigsEntry{}, minDescribeConfigsEntry},
		{&AlterConfigsResource{}, minAlterConfigsResource},
		{&AlterConfigsResult{}, minAlterConfigsResult},
		{&ProduceRequestTopic{}, minProduceRequestTopic},
		{&ProduceRequestPartition{}, minProduceRequestPartition},
		{&ProduceResponseTopic{}, minProduceResponseTopic},
		{&ProduceResponsePartition{}, minProduceResponsePartition},
		{&FetchRequestTopic{}, minFetchRequestTopic},
		{&FetchRequestPartition{}, minFetchRequestPartition},
		{&FetchResponseTopic{}, minFetchResponseTopic},
		{&FetchResponsePartition{}, minFetchResponsePartition},
		{&ListOffsetsRequestTopic{}, minListOffsetsRequestTopic},
		{&ListOffsetsRequestPartition{}, minListOffsetsRequestPartition},
		{&ListOffsetsResponseTopic{}, minListOffsetsResponseTopic},
		{&ListOffsetsResponsePartition{}, minListOffsetsResponsePartition},
		{&OffsetCommitRequestTopic{}, minOffsetCommitRequestTopic},
		{&OffsetCommitRequestPartition{}, minOffsetCommitRequestPartition},
		{&OffsetCommitResponseTopic{}, minOffsetCommitResponseTopic},
		{&PartitionResult{}, minPartitionResult},
		{&OffsetFetchRequestTopic{}, minOffsetFetchRequestTopic},
		{&OffsetFetchResponseTopic{}, minOffsetFetchResponseTopic},
		{&OffsetFetchResponsePartition{}, minOffsetFetchResponsePartition},
		{&SharedPart{}, minSharedPart},
		{&FetchForgottenTopic{}, minFetchForgottenTopic},
		{&OffsetForLeaderEpochTopic{}, minOffsetForLeaderEpochTopic},
		{&OffsetForLeaderEpochPartition{}, minOffsetForLeaderEpochPartition},
		{&OffsetForLeaderEpochTopicResult{}, minOffsetForLeaderEpochTopicResult},
		{&OffsetForLeaderEpochPartitionResult{}, minOffsetForLeaderEpochPartitionResult},
		{atV0((&DescribeReplicasTopic{}).appendTo), minDescribeReplicasTopic},
		{atV0((&DescribeReplicasPartition{}).appendTo), minDescribeReplicasPartition},
		{atV0((&DescribeReplicasReplica{}).appendTo), minDescribeReplicasReplica},
		{&CreatePartitionsTopic{}, minCreatePartitionsTopic},
		{&CreatePartitionsAssignment{}, minCreatePartitionsAssignment},
		{&CreatePartitionsResult{}, minCreatePartitionsResult},
		{&ElectLeadersTopic{}, minElectLeadersTopic},
		{&ElectLeadersResult{}, minElectLeadersResult},
		{&ElectLeadersPartitionResult{}, minElectLeadersPartition},
		{&ReassignTopic{}, minReassignTopic},
		{&ReassignPartition{}, minReassignPartition},
		{&ReassignTopicResult{}, minReassignTopicResult},
		{&ReassignPartitionResult{}, minReassignPartitionRes},
		{&ListReassignTopic{}, minListReassignTopic},
		{&ListedReassignTopic{}, minListedReassignTopic},
		{&ListedReassignPartition{}, minListedReassignPartRes},
	}
	for _, c := range cases {
		if got := len(c.e.appendTo(nil)); got != c.min {
			t.Errorf("%T: zero value encodes to %d bytes, declared minimum %d", c.e, got, c.min)
		}
	}
}

// atV0 is a versioned element's encoder at version 0, for the minimum-size check.
type atV0 func(dst []byte, v int16) []byte

func (f atV0) appendTo(dst []byte) []byte { return f(dst, 0) }

// TestAPITable checks the api table against NewRequest/NewResponse and Key.
func TestAPITable(t *testing.T) {
	for i, a := range apiTable {
		if i > 0 && apiTable[i-1].key >= a.key {
			t.Errorf("apiTable not in key order at %v", a.key)
		}
		req, err := NewRequest(a.key, 0)
		resp, err2 := NewResponse(a.key, 0)
		if !a.supported {
			if err != ErrUnknownAPI || err2 != ErrUnknownAPI {
				t.Errorf("reserved %v: got %v, %v; want ErrUnknownAPI", a.key, err, err2)
			}
			continue
		}
		if err != nil || err2 != nil {
			t.Fatalf("%v: %v, %v", a.key, err, err2)
		}
		if req.Key() != a.key || resp.Key() != a.key {
			t.Errorf("%v: Key() = %v / %v", a.key, req.Key(), resp.Key())
		}
		if _, err := NewRequest(a.key, a.max+1); err != ErrUnsupportedVersion {
			t.Errorf("%v v%d: got %v, want ErrUnsupportedVersion", a.key, a.max+1, err)
		}
	}
	if _, err := NewRequest(APIKey(999), 0); err != ErrUnknownAPI {
		t.Errorf("unknown key: %v", err)
	}
	if APIVersions.String() != "ApiVersions" || APIKey(999).String() != "APIKey(999)" {
		t.Errorf("String: %q %q", APIVersions.String(), APIKey(999).String())
	}
	// Every sample type is reachable through NewRequest or NewResponse.
	for _, s := range samples() {
		k := s.msg.(interface{ Key() APIKey }).Key()
		req, _ := NewRequest(k, 0)
		resp, _ := NewResponse(k, 0)
		st := reflect.TypeOf(s.msg)
		if reflect.TypeOf(req) != st && reflect.TypeOf(resp) != st {
			t.Errorf("%s: not constructed by NewRequest/NewResponse(%v)", s.name, k)
		}
	}
}
