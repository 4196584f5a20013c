package client

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// A commit whose context ends while it waits behind another commit (commits go one at a time,
// in order) is dropped, not sent once its turn comes: CommitOffsets has already told its
// caller that it failed (context.DeadlineExceeded), and a coordinator that applied it
// afterwards would hold an offset the application was told was not committed. With
// DefaultAPITimeout, a CommitSync or CommitOffsets made with context.Background() can end so
// too. The fake coordinator holds its answer to the first commit until the second has failed.
func TestCommitQueuedPastItsDeadlineIsNotSent(t *testing.T) {
	const group = "late"
	tp := TopicPartition{Topic: retryTopic}
	var fb *fakeBroker
	var commits []int64 // the offsets of tp committed, in the order the coordinator got them
	var held func()     // answers the first commit
	fb = startFakeBrokerConn(t, t.TempDir(), func(fc *fakeConn, h wire.RequestHeader, req wire.Request) []byte {
		switch req := req.(type) {
		case *wire.MetadataRequest:
			return coordinatorMetadata(fb)
		case *wire.OffsetCommitRequest:
			resp := &wire.OffsetCommitResponse{}
			for _, rt := range req.Topics {
				t := wire.OffsetCommitResponseTopic{Topic: rt.Topic}
				for _, rp := range rt.Partitions {
					commits = append(commits, rp.Offset)
					t.Partitions = append(t.Partitions, wire.PartitionResult{Partition: rp.Partition})
				}
				resp.Topics = append(resp.Topics, t)
			}
			body := resp.AppendTo(nil)
			if len(commits) == 1 {
				id := h.CorrelationID
				held = func() { _ = fc.reply(id, body) }
				return nil // answered by the test, later
			}
			return body
		default:
			t.Errorf("fake broker: unexpected %v request", h.APIKey)
			return nil
		}
	})
	t.Cleanup(fb.close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := NewConsumer(ctx, ConsumerConfig{Config: Config{Brokers: []string{fb.addr()}, Logger: fzDiscardLogger()},
		GroupID: group, EnableAutoCommit: new(false)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })

	first := make(chan error, 1)
	go func() { first <- c.CommitOffsets(context.Background(), map[TopicPartition]int64{tp: 1}) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		var out bool
		fb.locked(func() { out = len(commits) == 1 })
		if out {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first commit never reached the coordinator")
		}
	}

	// The second waits behind the first, unanswered, until its context ends.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := c.CommitOffsets(short, map[TopicPartition]int64{tp: 5}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the commit queued past its deadline: %v, want context.DeadlineExceeded", err)
	}
	fb.locked(func() { held() })
	if err := <-first; err != nil {
		t.Fatalf("the first commit: %v", err)
	}
	// A third commit, answered: the coordinator has then seen whatever the committer sent
	// before it (one connection, served in order).
	if err := c.CommitOffsets(ctx, map[TopicPartition]int64{tp: 7}); err != nil {
		t.Fatalf("the third commit: %v", err)
	}
	var got []int64
	fb.locked(func() { got = slices.Clone(commits) })
	if !slices.Equal(got, []int64{1, 7}) {
		t.Fatalf("the coordinator got commits of offsets %v, want [1 7]: the commit that failed at its deadline was sent after all", got)
	}
}

// TestCommitRefusedAfterALostAnswerIsAmbiguous: a commit whose first attempt fails retriably
// (the coordinator may have written it: an error answer, NOT_COORDINATOR, a connection lost
// before the answer) and whose retry is refused (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS) returns
// ErrCommitFailed with ErrCommitOutcomeUnknown, for the offset may be committed after all; a
// refusal at the first attempt is ErrCommitFailed alone.
func TestCommitRefusedAfterALostAnswerIsAmbiguous(t *testing.T) {
	const lostAnswer wire.ErrorCode = -99 // the fake broker closes the connection unanswered
	tp := TopicPartition{Topic: retryTopic}
	var fb *fakeBroker
	var answers []wire.ErrorCode // what each OffsetCommit gets, in turn
	fb = startFakeBrokerConn(t, t.TempDir(), func(fc *fakeConn, h wire.RequestHeader, req wire.Request) []byte {
		switch req := req.(type) {
		case *wire.MetadataRequest:
			return coordinatorMetadata(fb)
		case *wire.OffsetCommitRequest:
			code := answers[0]
			answers = answers[1:]
			if code == lostAnswer {
				_ = fc.nc.Close()
				return nil
			}
			resp := &wire.OffsetCommitResponse{}
			for _, rt := range req.Topics {
				t := wire.OffsetCommitResponseTopic{Topic: rt.Topic}
				for _, rp := range rt.Partitions {
					t.Partitions = append(t.Partitions, wire.PartitionResult{Partition: rp.Partition, ErrorCode: code})
				}
				resp.Topics = append(resp.Topics, t)
			}
			return resp.AppendTo(nil)
		default:
			t.Errorf("fake broker: unexpected %v request", h.APIKey)
			return nil
		}
	})
	t.Cleanup(fb.close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := NewConsumer(ctx, ConsumerConfig{Config: Config{Brokers: []string{fb.addr()}, Logger: fzDiscardLogger()},
		RetryBackoff: time.Millisecond, RetryBackoffMax: 5 * time.Millisecond, GroupID: "amb", EnableAutoCommit: new(false)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	for _, tc := range []struct {
		name    string
		answers []wire.ErrorCode
		unknown bool
	}{
		{"refused at once", []wire.ErrorCode{wire.ErrIllegalGeneration}, false},
		{"refused on the retry", []wire.ErrorCode{wire.ErrCoordinatorNotAvailable, wire.ErrIllegalGeneration}, true},
		// A coordinator whose leadership moved after it appended answers NOT_COORDINATOR:
		// the record may be committed by the new leader.
		{"refused after NOT_COORDINATOR", []wire.ErrorCode{wire.ErrNotCoordinator, wire.ErrRebalanceInProgress}, true},
		{"refused after a lost connection", []wire.ErrorCode{lostAnswer, wire.ErrIllegalGeneration}, true},
	} {
		fb.locked(func() { answers = slices.Clone(tc.answers) })
		err := c.CommitOffsets(ctx, map[TopicPartition]int64{tp: 5})
		if !errors.Is(err, ErrCommitFailed) || errors.Is(err, ErrCommitOutcomeUnknown) != tc.unknown {
			t.Errorf("%s: %v; want ErrCommitFailed, ErrCommitOutcomeUnknown %v", tc.name, err, tc.unknown)
		}
	}
}

// coordinatorMetadata is the fake broker fb's Metadata answer for the commit tests: it leads
// retryTopic's partition and __consumer_offsets' (so it is every group's coordinator).
func coordinatorMetadata(fb *fakeBroker) []byte {
	parts := []wire.MetadataPartition{{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}
	return (&wire.MetadataResponse{ControllerID: 1,
		Brokers: []wire.MetadataBroker{{NodeID: 1, Host: "127.0.0.1", Port: 9, UnixPath: fb.path}},
		Topics:  []wire.MetadataTopic{{Topic: retryTopic, Partitions: parts}, {Topic: offsetsTopic, IsInternal: true, Partitions: parts}},
	}).AppendTo(nil)
}
