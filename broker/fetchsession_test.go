package broker

import (
	"errors"
	"testing"

	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// TestFetchSessionCache: the leader's session cache, step by step. A full fetch with epoch 0
// makes a session; an incremental fetch must carry the session's next epoch (else
// INVALID_FETCH_SESSION_EPOCH) and a held id (else FETCH_SESSION_ID_NOT_FOUND); it reads every
// partition of the session with the fields last sent (added, updated and forgotten ones
// applied), and its answer keeps only the partitions with news (records, an error, a new high
// watermark or log start), with their record lengths in step. Epoch -1 closes a session; a
// full cache evicts its least recently used session for a new one.
func TestFetchSessionCache(t *testing.T) {
	var fs fetchSessions
	part := func(p int32, off int64) wire.FetchRequestPartition {
		return wire.FetchRequestPartition{Partition: p, FetchOffset: off, CurrentLeaderEpoch: 5, PartitionMaxBytes: 100, DurableOffset: off}
	}
	full := &wire.FetchRequest{Version: 2, SessionEpoch: 0, Topics: []wire.FetchRequestTopic{
		{Topic: "a", Partitions: []wire.FetchRequestPartition{part(0, 10), part(1, 20)}},
		{Topic: "b", Partitions: []wire.FetchRequestPartition{part(0, 30)}},
	}}
	s, err := fs.begin(full)
	if err != nil || s == nil {
		t.Fatalf("new session: %v %v", s, err)
	}
	answer := func(s *fetchSession, incremental bool, parts map[topicPartition][2]int64, req *wire.FetchRequest) (*wire.FetchResponse, []int32) {
		t.Helper()
		resp := &wire.FetchResponse{Version: 2}
		var lens []int32
		for _, rt := range req.Topics {
			out := wire.FetchResponseTopic{Topic: rt.Topic}
			for _, rp := range rt.Partitions {
				v := parts[topicPartition{rt.Topic, rp.Partition}] // records length, high watermark
				out.Partitions = append(out.Partitions, wire.FetchResponsePartition{Partition: rp.Partition, HighWatermark: v[1], LogStartOffset: 0})
				lens = append(lens, int32(v[0]))
			}
			resp.Topics = append(resp.Topics, out)
		}
		lens, _ = fs.answer(s, incremental, resp, lens, make([]segment.Slice, len(lens)))
		return resp, lens
	}
	state := map[topicPartition][2]int64{{"a", 0}: {0, 10}, {"a", 1}: {0, 20}, {"b", 0}: {0, 30}}
	resp, lens := answer(s, false, state, full)
	if resp.SessionID != s.id || resp.NumPartitions() != 3 || len(lens) != 3 {
		t.Fatalf("full answer: session %d, %d partitions, want %d and 3", resp.SessionID, resp.NumPartitions(), s.id)
	}

	// Epoch 1: a/1 moved to 25, b/0 forgotten, c/0 added. The fetch reads a/0 (as last sent),
	// a/1 (updated) and c/0.
	inc := &wire.FetchRequest{Version: 2, SessionID: s.id, SessionEpoch: 1,
		Topics:    []wire.FetchRequestTopic{{Topic: "a", Partitions: []wire.FetchRequestPartition{part(1, 25)}}, {Topic: "c", Partitions: []wire.FetchRequestPartition{part(0, 0)}}},
		Forgotten: []wire.FetchForgottenTopic{{Topic: "b", Partitions: []int32{0}}}}
	if _, err := fs.begin(inc); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		topic string
		p     int32
		off   int64
	}{{"a", 0, 10}, {"a", 1, 25}, {"c", 0, 0}}
	var got []struct {
		topic string
		p     int32
		off   int64
	}
	for _, rt := range inc.Topics {
		for _, rp := range rt.Partitions {
			got = append(got, struct {
				topic string
				p     int32
				off   int64
			}{rt.Topic, rp.Partition, rp.FetchOffset})
		}
	}
	if len(got) != len(want) {
		t.Fatalf("incremental fetch reads %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("incremental fetch reads %v, want %v", got, want)
		}
	}
	// a/0: nothing new (left out); a/1: records; c/0: new to the session (listed).
	state = map[topicPartition][2]int64{{"a", 0}: {0, 10}, {"a", 1}: {70, 27}, {"c", 0}: {0, 0}}
	resp, lens = answer(s, true, state, inc)
	if resp.NumPartitions() != 2 || len(lens) != 2 || resp.Topics[0].Topic != "a" || resp.Topics[0].Partitions[0].Partition != 1 || lens[0] != 70 || resp.Topics[1].Topic != "c" || lens[1] != 0 {
		t.Fatalf("incremental answer %+v lens %v, want a/1 (70 bytes) and c/0", resp.Topics, lens)
	}

	// Epoch 2, nothing changed and nothing new: an empty answer. Then only a high watermark
	// move is news.
	idle := &wire.FetchRequest{Version: 2, SessionID: s.id, SessionEpoch: 2}
	if _, err := fs.begin(idle); err != nil {
		t.Fatal(err)
	}
	state = map[topicPartition][2]int64{{"a", 0}: {0, 10}, {"a", 1}: {0, 27}, {"c", 0}: {0, 0}}
	if resp, _ := answer(s, true, state, idle); resp.NumPartitions() != 0 {
		t.Fatalf("idle answer lists %+v, want nothing", resp.Topics)
	}
	idle = &wire.FetchRequest{Version: 2, SessionID: s.id, SessionEpoch: 3}
	if _, err := fs.begin(idle); err != nil {
		t.Fatal(err)
	}
	state[topicPartition{"a", 0}] = [2]int64{0, 11}
	if resp, _ := answer(s, true, state, idle); resp.NumPartitions() != 1 || resp.Topics[0].Partitions[0].HighWatermark != 11 {
		t.Fatalf("answer after a high watermark move lists %+v, want a/0 alone", resp.Topics)
	}

	// Wrong epoch, unknown id.
	if _, err := fs.begin(&wire.FetchRequest{Version: 2, SessionID: s.id, SessionEpoch: 9}); !errors.Is(err, errFetchSessionEpoch) || errorCode(err) != wire.ErrInvalidFetchSessionEpoch {
		t.Fatalf("wrong epoch: %v", err)
	}
	if _, err := fs.begin(&wire.FetchRequest{Version: 2, SessionID: s.id + 1, SessionEpoch: 1}); !errors.Is(err, errFetchSessionNotFound) || errorCode(err) != wire.ErrFetchSessionIDNotFound {
		t.Fatalf("unknown id: %v", err)
	}
	// Epoch -1 closes it.
	if sess, err := fs.begin(&wire.FetchRequest{Version: 2, SessionID: s.id, SessionEpoch: -1}); sess != nil || err != nil || fs.len() != 0 {
		t.Fatalf("close: %v %v, %d sessions left", sess, err, fs.len())
	}

	// A full cache evicts its least recently used session.
	var first, second *fetchSession
	for i := range fetchSessionSlots {
		s, _ := fs.begin(&wire.FetchRequest{Version: 2})
		switch i {
		case 0:
			first = s
		case 1:
			second = s
		}
	}
	if _, err := fs.begin(&wire.FetchRequest{Version: 2, SessionID: first.id, SessionEpoch: 0}); err != nil {
		t.Fatal(err)
	}
	// That closed first and made a new one: now second is the least recently used.
	fs.begin(&wire.FetchRequest{Version: 2})
	if fs.len() != fetchSessionSlots {
		t.Fatalf("%d sessions, want the cache full at %d", fs.len(), fetchSessionSlots)
	}
	fs.mu.Lock()
	_, kept := fs.byID[second.id]
	fs.mu.Unlock()
	if kept {
		t.Fatal("the least recently used session was not the one evicted")
	}
	// v0 and v1 fetches have no sessions.
	if s, err := fs.begin(&wire.FetchRequest{Version: 1, SessionEpoch: 0}); s != nil || err != nil {
		t.Fatalf("v1 fetch: session %v %v", s, err)
	}
}
