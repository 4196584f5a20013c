package wire

import (
	"bytes"
	"errors"
	"testing"
)

// TestFetchSessionVersions pins what Fetch v2 changes (KIP-227 sessions, DurableOffset): v0 and
// v1 bytes stay what they were whatever the new fields hold, v2 adds exactly its fields where
// docs/protocol.md puts them, v2 bytes do not decode as v1 (nor v1 as v2), and a v0/v1 request
// decodes as a sessionless full fetch.
func TestFetchSessionVersions(t *testing.T) {
	req := func(v int16, withSession bool) *FetchRequest {
		f := &FetchRequest{Version: v, ReplicaID: 2, MaxWaitMs: 500, MinBytes: 1, MaxBytes: 1 << 20,
			Topics: []FetchRequestTopic{{Topic: "t", Partitions: []FetchRequestPartition{
				{Partition: 0, CurrentLeaderEpoch: 1, FetchOffset: 5, LogStartOffset: 0, PartitionMaxBytes: 1 << 10},
				{Partition: 1, CurrentLeaderEpoch: 1, FetchOffset: 6, LogStartOffset: 0, PartitionMaxBytes: 1 << 10},
			}}}}
		if withSession {
			f.SessionID, f.SessionEpoch = 77, 3
			f.Topics[0].Partitions[0].DurableOffset = 4
			f.Topics[0].Partitions[1].DurableOffset = 6
			f.Forgotten = []FetchForgottenTopic{{Topic: "u", Partitions: []int32{0, 1, 2}}}
		}
		return f
	}
	for _, v := range []int16{0, 1} {
		if !bytes.Equal(req(v, true).AppendTo(nil), req(v, false).AppendTo(nil)) {
			t.Fatalf("fetch request v%d encodes the session fields", v)
		}
		var got FetchRequest
		got.Version = v
		got.Forgotten = []FetchForgottenTopic{{Topic: "stale"}} // a reused value's leftovers
		got.SessionID = 9
		if err := got.ReadFrom(req(v, true).AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		if got.SessionID != 0 || got.SessionEpoch != FinalSessionEpoch || len(got.Forgotten) != 0 || got.Topics[0].Partitions[1].DurableOffset != -1 {
			t.Fatalf("fetch request v%d decoded as %+v, want a sessionless full fetch", v, got)
		}
	}
	v1 := req(1, true).AppendTo(nil)
	v2 := req(2, true).AppendTo(nil)
	// sessionId + sessionEpoch, a durableOffset per partition, and the forgotten topics.
	forgotten := appendArray(nil, req(2, true).Forgotten)
	if want := len(v1) + 8 + 2*8 + len(forgotten); len(v2) != want {
		t.Fatalf("fetch request v2 is %d bytes, want %d", len(v2), want)
	}
	if !bytes.HasSuffix(v2, forgotten) {
		t.Fatal("fetch request v2 does not end with the forgotten topics")
	}
	if err := (&FetchRequest{Version: 1}).ReadFrom(v2); err == nil {
		t.Fatal("fetch request v2 bytes decoded as v1")
	}
	if err := (&FetchRequest{Version: 2}).ReadFrom(v1); err == nil {
		t.Fatal("fetch request v1 bytes decoded as v2")
	}
	got := FetchRequest{Version: 2}
	if err := got.ReadFrom(v2); err != nil || got.SessionID != 77 || got.SessionEpoch != 3 ||
		got.Topics[0].Partitions[0].DurableOffset != 4 || len(got.Forgotten) != 1 || len(got.Forgotten[0].Partitions) != 3 {
		t.Fatalf("fetch request v2 decoded %+v, %v", got, err)
	}

	resp := func(v int16, session int32) *FetchResponse {
		return &FetchResponse{Version: v, SessionID: session, Topics: []FetchResponseTopic{{Topic: "t",
			Partitions: []FetchResponsePartition{{Partition: 0, HighWatermark: 5, CurrentLeader: NoLeaderHint, Records: []byte("rec")}}}}}
	}
	for _, v := range []int16{0, 1} {
		if !bytes.Equal(resp(v, 77).AppendTo(nil), resp(v, 0).AppendTo(nil)) {
			t.Fatalf("fetch response v%d encodes the session id", v)
		}
		got := FetchResponse{Version: v, SessionID: 9}
		if err := got.ReadFrom(resp(v, 77).AppendTo(nil)); err != nil || got.SessionID != 0 {
			t.Fatalf("fetch response v%d decoded session %d, %v", v, got.SessionID, err)
		}
	}
	r1, r2 := resp(1, 77).AppendTo(nil), resp(2, 77).AppendTo(nil)
	// The session id sits right after throttleMs and errorCode.
	if len(r2) != len(r1)+4 || !bytes.Equal(r2[6:10], []byte{0, 0, 0, 77}) || !bytes.Equal(r2[10:], r1[6:]) {
		t.Fatalf("fetch response v2 layout: % x vs v1 % x", r2, r1)
	}
	gr := FetchResponse{Version: 2}
	if err := gr.ReadFrom(r2); err != nil || gr.SessionID != 77 || string(gr.Topics[0].Partitions[0].Records) != "rec" {
		t.Fatalf("fetch response v2 decoded %+v, %v", gr, err)
	}
	// The sendfile frame encoder writes the session id too: spliced, it is AppendResponseFrame's.
	frame, cuts, err := AppendFetchResponseFrame(nil, 5, resp(2, 77), []int32{3}, nil)
	if err != nil || !bytes.Equal(splice(frame, 0, cuts, [][]byte{[]byte("rec")}), AppendResponseFrame(nil, 5, resp(2, 77))) {
		t.Fatalf("fetch v2 frame differs from AppendResponseFrame: %v", err)
	}

	if lo, hi, _ := Fetch.Versions(); lo != 0 || hi != 2 {
		t.Fatalf("Fetch advertises %d-%d, want 0-2", lo, hi)
	}
	// FetchShared (a local consumer's) stays at v1: its requests never carry sessions.
	if _, hi, _ := FetchShared.Versions(); hi != 1 {
		t.Fatalf("FetchShared advertises up to v%d", hi)
	}
	q, err := NewRequest(Fetch, 2)
	if err != nil || VersionOf(q) != 2 {
		t.Fatalf("NewRequest(Fetch, 2) = %+v, %v", q, err)
	}
	if _, err := NewRequest(Fetch, 3); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("NewRequest(Fetch, 3): %v", err)
	}
}

// TestOffsetForLeaderEpochLayout pins the v0 encoding (Kafka's v3 field order, non-flexible)
// byte for byte, and that the key is served.
func TestOffsetForLeaderEpochLayout(t *testing.T) {
	req := &OffsetForLeaderEpochRequest{ReplicaID: 2, Topics: []OffsetForLeaderEpochTopic{{Topic: "t",
		Partitions: []OffsetForLeaderEpochPartition{{Partition: 1, CurrentLeaderEpoch: 5, LeaderEpoch: 4}}}}}
	want := []byte{0, 0, 0, 2, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 4}
	if got := req.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("request % x, want % x", got, want)
	}
	resp := &OffsetForLeaderEpochResponse{ThrottleMs: 1, Topics: []OffsetForLeaderEpochTopicResult{{Topic: "t",
		Partitions: []OffsetForLeaderEpochPartitionResult{{ErrorCode: ErrFencedLeaderEpoch, Partition: 1, LeaderEpoch: 4, EndOffset: 9}}}}}
	want = []byte{0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1,
		byte(ErrFencedLeaderEpoch >> 8), byte(ErrFencedLeaderEpoch), 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 9}
	if got := resp.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("response % x, want % x", got, want)
	}
	q, err := NewRequest(OffsetForLeaderEpoch, 0)
	if err != nil || q.Key() != OffsetForLeaderEpoch {
		t.Fatalf("NewRequest(OffsetForLeaderEpoch, 0) = %v, %v", q, err)
	}
	if _, err := NewRequest(OffsetForLeaderEpoch, 1); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("NewRequest(OffsetForLeaderEpoch, 1): %v", err)
	}
}
