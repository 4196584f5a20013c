package wire

import (
	"bytes"
	"slices"
	"testing"
)

// TestMetadataVersions pins what v1 changes: each partition gains corruptReplicas at its end,
// v0's bytes stay what they were (a v0 answer never carries the field), and a response decodes
// only in the version it was encoded in.
func TestMetadataVersions(t *testing.T) {
	resp := func(v int16, corrupt []int32) *MetadataResponse {
		return &MetadataResponse{Version: v, ControllerID: 1, Brokers: []MetadataBroker{{NodeID: 1, Host: "h", Port: 9}},
			Topics: []MetadataTopic{{Topic: "t", Partitions: []MetadataPartition{
				{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, CorruptReplicas: corrupt},
				{Partition: 1, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}},
			}}}}
	}
	v0 := resp(0, []int32{1}).AppendTo(nil)
	if plain := resp(0, nil).AppendTo(nil); !bytes.Equal(v0, plain) {
		t.Fatal("v0 encodes corruptReplicas")
	}
	v1 := resp(1, []int32{1}).AppendTo(nil)
	if len(v1) != len(v0)+4+4+4 { // two counts and one replica id
		t.Fatalf("v1 is %d bytes, v0 %d", len(v1), len(v0))
	}
	got := MetadataResponse{Version: 1}
	if err := got.ReadFrom(v1); err != nil {
		t.Fatal(err)
	}
	if ps := got.Topics[0].Partitions; !slices.Equal(ps[0].CorruptReplicas, []int32{1}) || len(ps[1].CorruptReplicas) != 0 {
		t.Fatalf("v1 decoded %+v", ps)
	}
	if err := (&MetadataResponse{}).ReadFrom(v1); err == nil {
		t.Fatal("v1 bytes decoded as v0")
	}
	got = MetadataResponse{}
	if err := got.ReadFrom(v0); err != nil || len(got.Topics[0].Partitions[0].CorruptReplicas) != 0 {
		t.Fatalf("v0 decoded %+v, %v", got.Topics, err)
	}
	r, err := NewResponse(Metadata, 1)
	if err != nil || r.(*MetadataResponse).Version != 1 {
		t.Fatalf("NewResponse(Metadata, 1) = %+v, %v", r, err)
	}
	q, err := NewRequest(Metadata, 1)
	if err != nil || VersionOf(q) != 1 {
		t.Fatalf("NewRequest(Metadata, 1) = %+v, %v", q, err)
	}
	if VersionOf(&ProduceRequest{}) != 0 {
		t.Fatal("a request of one version is not version 0")
	}
}
