package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// replyDroppingConn, once armed, lets the next propose request through and then loses its
// answer, as a link that drops after the leader committed does.
type replyDroppingConn struct {
	net.Conn
	armed *atomic.Bool
	drop  bool
}

func (c *replyDroppingConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"op":"propose"`)) && c.armed.CompareAndSwap(true, false) {
		c.drop = true
	}
	return c.Conn.Write(p)
}

func (c *replyDroppingConn) Read(p []byte) (int, error) {
	if !c.drop {
		return c.Conn.Read(p)
	}
	c.drop = false
	var hdr [4]byte
	if _, err := io.ReadFull(c.Conn, hdr[:]); err != nil {
		return 0, err
	}
	if _, err := io.CopyN(io.Discard, c.Conn, int64(binary.BigEndian.Uint32(hdr[:]))); err != nil {
		return 0, err
	}
	_ = c.Conn.Close()
	return 0, errors.New("test: answer lost")
}

// newReplyDroppingCluster is a 3-node cluster with its brokers registered and unfenced whose
// links lose the answer to the first propose after armed is set.
func newReplyDroppingCluster(t *testing.T) (*testCluster, *atomic.Bool) {
	tc, lns := newTestCluster(t, 3)
	armed := new(atomic.Bool)
	tc.tweak = func(cfg *Config) {
		dial := cfg.Dial
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &replyDroppingConn{Conn: conn, armed: armed}, nil
		}
	}
	tc.start(lns)
	registerAll(t, tc.node(tc.leader()), tc.voters)
	return tc, armed
}

// TestSetPartitionLeaderRetryAfterLostAnswer: a forwarded leader change that committed but
// whose answer was lost is refused on retry for the epoch it bumped itself; SetPartitionLeader
// sees the partition at the requested leader one epoch on and reports success.
func TestSetPartitionLeaderRetryAfterLostAnswer(t *testing.T) {
	tc, armed := newReplyDroppingCluster(t)
	f := tc.node(tc.follower())
	createTopic(t, f, "t", 3)
	tm, _ := f.Metadata().Topic("t")
	p := tm.Partitions[0]
	to := p.ISR[0]
	if to == p.Leader {
		to = p.ISR[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	armed.Store(true)
	got, err := f.SetPartitionLeader(ctx, LeaderChange{Topic: "t", Partition: 0, Leader: to, LeaderEpoch: p.LeaderEpoch})
	if err != nil {
		t.Fatalf("leader change whose first answer was lost: %v", err)
	}
	if armed.Load() {
		t.Fatal("the change was never forwarded")
	}
	if got.Leader != to || got.LeaderEpoch != p.LeaderEpoch+1 {
		t.Fatalf("partition after the change: leader %d epoch %d, want %d at %d", got.Leader, got.LeaderEpoch, to, p.LeaderEpoch+1)
	}
	// A genuinely stale change is still refused.
	if _, err := f.SetPartitionLeader(ctx, LeaderChange{Topic: "t", Partition: 0, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch}); !errors.Is(err, ErrStaleLeaderEpoch) {
		t.Fatalf("stale leader change: %v, want ErrStaleLeaderEpoch", err)
	}
}

// TestDeleteTopicRetryAfterLostAnswer: a forwarded delete that committed but whose answer was
// lost is retried; the retry finds the topic's id gone (UNKNOWN_TOPIC) and DeleteTopic reports
// the earlier try's success. A delete of a topic that does not exist still fails.
func TestDeleteTopicRetryAfterLostAnswer(t *testing.T) {
	tc, armed := newReplyDroppingCluster(t)
	f := tc.node(tc.follower())
	createTopic(t, f, "t", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	armed.Store(true)
	if err := f.DeleteTopic(ctx, "t"); err != nil {
		t.Fatalf("delete whose first answer was lost: %v", err)
	}
	if armed.Load() {
		t.Fatal("the delete was never forwarded")
	}
	if _, ok := f.Metadata().Topic("t"); ok {
		t.Fatal("topic t still there after the delete")
	}
	if err := f.DeleteTopic(ctx, "t"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("delete of a deleted topic: %v, want ErrUnknownTopic", err)
	}
}

// TestAlterPartitionRetryAfterLostAnswer: as for SetPartitionLeader, an ISR change that
// committed but whose answer was lost is reported as committed, not as a stale partition epoch.
func TestAlterPartitionRetryAfterLostAnswer(t *testing.T) {
	tc, armed := newReplyDroppingCluster(t)
	f := tc.node(tc.follower())
	createTopic(t, f, "t", 3)
	md := f.Metadata()
	tm, _ := md.Topic("t")
	p := tm.Partitions[0]
	b, _ := md.Broker(p.Leader)
	req := AlterPartitionRequest{Topic: "t", Partition: 0, BrokerID: p.Leader, BrokerEpoch: b.Epoch,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{p.Leader}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	armed.Store(true)
	got, err := f.AlterPartition(ctx, req)
	if err != nil {
		t.Fatalf("ISR change whose first answer was lost: %v", err)
	}
	if armed.Load() {
		t.Fatal("the change was never forwarded")
	}
	if len(got.ISR) != 1 || got.ISR[0] != p.Leader || got.PartitionEpoch != p.PartitionEpoch+1 {
		t.Fatalf("partition after the change: %+v", got)
	}
	req.ISR = p.ISR // a genuinely stale change is still refused
	if _, err := f.AlterPartition(ctx, req); !errors.Is(err, ErrInvalidUpdateVersion) {
		t.Fatalf("stale ISR change: %v, want ErrInvalidUpdateVersion", err)
	}
}
