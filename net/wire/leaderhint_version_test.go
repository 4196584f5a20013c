package wire

import (
	"bytes"
	"testing"
)

// TestLeaderHintVersions pins what Produce and Fetch v1 change (KIP-951): v0's bytes stay what
// they were whatever the hint fields hold, v1 adds 8 bytes per partition and the endpoints,
// a v1 answer does not decode as v0, and a v0 decode reads no hint (NoLeaderHint, never
// broker 0).
func TestLeaderHintVersions(t *testing.T) {
	hint := LeaderHint{LeaderID: 2, LeaderEpoch: 9}
	ep := []MetadataBroker{{NodeID: 2, Host: "h", Port: 9}}
	produce := func(v int16, h LeaderHint, eps []MetadataBroker) *ProduceResponse {
		return &ProduceResponse{Version: v, NodeEndpoints: eps, Topics: []ProduceResponseTopic{{Topic: "t",
			Partitions: []ProduceResponsePartition{{Partition: 0, ErrorCode: ErrNotLeaderOrFollower, CurrentLeader: h}}}}}
	}
	v0 := produce(0, hint, ep).AppendTo(nil)
	if plain := produce(0, NoLeaderHint, nil).AppendTo(nil); !bytes.Equal(v0, plain) {
		t.Fatal("produce v0 encodes the hint or the endpoints")
	}
	v1 := produce(1, hint, ep).AppendTo(nil)
	if want := len(v0) + 8 + len(appendArray(nil, ep)); len(v1) != want {
		t.Fatalf("produce v1 is %d bytes, want %d", len(v1), want)
	}
	if err := (&ProduceResponse{}).ReadFrom(v1); err == nil {
		t.Fatal("produce v1 bytes decoded as v0")
	}
	got := ProduceResponse{Version: 1}
	if err := got.ReadFrom(v1); err != nil || got.Topics[0].Partitions[0].CurrentLeader != hint || got.NodeEndpoints[0] != ep[0] {
		t.Fatalf("produce v1 decoded %+v, %v", got, err)
	}
	got0 := ProduceResponse{}
	if err := got0.ReadFrom(v0); err != nil || got0.Topics[0].Partitions[0].CurrentLeader.Known() {
		t.Fatalf("produce v0 decoded %+v, %v", got0, err)
	}

	fetch := func(v int16, h LeaderHint, eps []MetadataBroker) *FetchResponse {
		return &FetchResponse{Version: v, NodeEndpoints: eps, Topics: []FetchResponseTopic{{Topic: "t",
			Partitions: []FetchResponsePartition{{Partition: 0, ErrorCode: ErrNotLeaderOrFollower, CurrentLeader: h, Records: []byte("rec")}}}}}
	}
	f0 := fetch(0, hint, ep).AppendTo(nil)
	if plain := fetch(0, NoLeaderHint, nil).AppendTo(nil); !bytes.Equal(f0, plain) {
		t.Fatal("fetch v0 encodes the hint or the endpoints")
	}
	f1 := fetch(1, hint, ep).AppendTo(nil)
	if err := (&FetchResponse{}).ReadFrom(f1); err == nil {
		t.Fatal("fetch v1 bytes decoded as v0")
	}
	fg := FetchResponse{Version: 1}
	if err := fg.ReadFrom(f1); err != nil || fg.Topics[0].Partitions[0].CurrentLeader != hint || string(fg.Topics[0].Partitions[0].Records) != "rec" || len(fg.NodeEndpoints) != 1 {
		t.Fatalf("fetch v1 decoded %+v, %v", fg, err)
	}
	// The FetchShared layout: spans after the endpoints, and the frame encoder agrees.
	fs := &FetchSharedResponse{FetchResponse: *fetch(1, hint, ep), Spans: []FileSpan{{Index: 0, Path: "/p", Len: 3}}}
	frame, cuts, err := AppendFetchSharedResponseFrame(nil, 5, &fs.FetchResponse, []int32{3}, nil, fs.Spans)
	if err != nil || !bytes.Equal(splice(frame, 0, cuts, [][]byte{[]byte("rec")}), AppendResponseFrame(nil, 5, fs)) {
		t.Fatalf("FetchShared v1 frame differs from AppendResponseFrame: %v", err)
	}
	for _, k := range []APIKey{Produce, Fetch, ProduceShared, FetchShared} {
		if _, hi, _ := k.Versions(); hi < 1 { // Fetch goes on to v2 (fetchsession_version_test.go)
			t.Errorf("%v advertises up to v%d", k, hi)
		}
		q, err := NewRequest(k, 1)
		if err != nil || VersionOf(q) != 1 {
			t.Errorf("NewRequest(%v, 1) = %+v, %v", k, q, err)
		}
	}
}
