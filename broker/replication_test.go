package broker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/faultnet"
	"github.com/sluicemq/sluice/net/wire"
)

// The replication tests of issue #23 on in-process three-broker clusters (the harness is
// replication_harness_test.go): RF 3, min.insync.replicas=2, an acks=all producer with retries
// running throughout; a leader killed and restarted, a leader isolated past its session (a
// zombie) and healed, a follower restarted again and again, and the Jepsen 2013 case. Each ends
// with verify: the cluster settles (ISR of 3, every replica's log end at the leader's high
// watermark), every replica's log is byte-identical up to the high watermark, and every
// acknowledged record is at the offset its acknowledgement gave.

// sideProduce sends one record of value v to node i's topic-part with acks through sideNode
// (which isolate leaves connected) and returns the partition's answer; a transport error is
// returned as NETWORK_EXCEPTION.
func (c *rcluster) sideProduce(i int, topic string, part int32, acks int16, v string, timeout time.Duration) wire.ProduceResponsePartition {
	c.t.Helper()
	bl := batch.NewBuilder(batch.DefaultBuilderOptions())
	bl.Append(&batch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
	recs, err := bl.Build()
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Second)
	defer cancel()
	conn, err := client.DialWith(ctx, c.net.Dialer(sideNode), c.cfgs[i].Listen, "rtest-side")
	if err != nil {
		return wire.ProduceResponsePartition{ErrorCode: wire.ErrNetworkException}
	}
	defer conn.Close()
	var resp wire.ProduceResponse
	if err := conn.Call(ctx, &wire.ProduceRequest{Acks: acks, TimeoutMs: int32(timeout / time.Millisecond), Topics: []wire.ProduceRequestTopic{
		{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: part, Records: append([]byte(nil), recs...)}}},
	}}, &resp); err != nil {
		return wire.ProduceResponsePartition{ErrorCode: wire.ErrNetworkException}
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("produce answered %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

// TestReplicationLeaderKilled: the leader of a partition is killed (no controlled shutdown, no
// clean-shutdown marker) under the producer; another replica of the ISR takes over once the
// session times out and the producer resumes through it; the old leader restarts on its data
// directory, truncates to the new leader's log where they diverge and catches up. Nothing
// acknowledged is lost.
func TestReplicationLeaderKilled(t *testing.T) {
	c := newRCluster(t, nil)
	const topic, parts = "kill", 3
	c.createTopic(topic, parts, nil)
	p := c.startProducer(topic, parts, "k")
	c.waitAcks(p, 150, 15*time.Second, "before the kill")

	pm := c.meta(c.live()[0], topic, 0)
	victim := int(pm.Leader)
	c.kill(victim)
	c.waitNewLeader(topic, 0, pm.Leader, pm.LeaderEpoch, 15*time.Second)
	c.waitAcks(p, 150, 20*time.Second, fmt.Sprintf("after the kill of leader %d", victim))
	c.restart(victim)
	c.waitAcks(p, 100, 15*time.Second, fmt.Sprintf("after the restart of %d", victim))
	p.finish()
	c.verify(topic, parts, p.l, nil)
}

// TestReplicationLeaderKilledLosingItsTail: as TestReplicationLeaderKilled, but the killed
// leader also loses the last 1000 bytes of each partition's newest segment (and its recovery
// points) before it restarts: its recovery truncates the torn batch, and it fetches back from
// the new leader what it lost. Nothing acknowledged is lost: each acknowledged record is on
// another replica of the ISR too.
func TestReplicationLeaderKilledLosingItsTail(t *testing.T) {
	c := newRCluster(t, nil)
	const topic, parts = "tail", 2
	c.createTopic(topic, parts, nil)
	p := c.startProducer(topic, parts, "t")
	c.waitAcks(p, 200, 15*time.Second, "before the kill")

	pm := c.meta(c.live()[0], topic, 0)
	victim := int(pm.Leader)
	c.kill(victim)
	c.loseTail(victim, topic, parts, 1000)
	c.waitNewLeader(topic, 0, pm.Leader, pm.LeaderEpoch, 15*time.Second)
	c.waitAcks(p, 100, 20*time.Second, fmt.Sprintf("after the kill of leader %d", victim))
	c.restart(victim)
	c.waitAcks(p, 100, 15*time.Second, fmt.Sprintf("after the restart of %d", victim))
	p.finish()
	c.verify(topic, parts, p.l, nil)
}

// TestReplicationZombieLeaderFenced: the leader of a partition is isolated from every other
// node and from the producer, past broker.session.timeout.ms: a zombie whose goroutines keep
// running. Records written to it with acks=1 right after the cut (through a side connection)
// are appended there only; one written with acks=all is not acknowledged. The others elect a new leader from the ISR and the producer goes on
// through it. When the network heals, the zombie finds itself fenced, follows the new leader,
// truncates the records only it had, and catches up: they are in no replica's log, and nothing
// acknowledged with acks=all is lost.
func TestReplicationZombieLeaderFenced(t *testing.T) {
	c := newRCluster(t, nil)
	const topic, parts = "zombie", 2
	c.createTopic(topic, parts, nil)
	p := c.startProducer(topic, parts, "z")
	c.waitAcks(p, 100, 15*time.Second, "before the isolation")

	pm := c.meta(c.live()[0], topic, 0)
	zombie := int(pm.Leader)
	c.isolate(zombie)
	forbidden := map[string]bool{}
	for k := range 5 {
		v := fmt.Sprintf("zombie-only-%d", k)
		if r := c.sideProduce(zombie, topic, 0, wire.AcksLeader, v, 2*time.Second); r.ErrorCode == wire.NoError {
			forbidden[v] = true
		}
	}
	if len(forbidden) == 0 {
		t.Errorf("the isolated leader %d accepted no acks=1 record right after the cut: the test cannot show their truncation", zombie)
	}
	// acks=all on the zombie: whatever it answers, never success (no follower can fetch it),
	// and whether it appended it or not, it reached no other replica.
	if r := c.sideProduce(zombie, topic, 0, wire.AcksAll, "zombie-acks-all", 3*time.Second); r.ErrorCode == wire.NoError {
		t.Errorf("the isolated leader %d acknowledged an acks=all record at offset %d", zombie, r.BaseOffset)
	} else {
		t.Logf("acks=all on the isolated leader: %v", r.ErrorCode)
	}
	forbidden["zombie-acks-all"] = true
	c.waitNewLeader(topic, 0, pm.Leader, pm.LeaderEpoch, 15*time.Second)
	c.waitAcks(p, 100, 20*time.Second, fmt.Sprintf("through the new leader while %d is isolated", zombie))
	if got := c.meta(zombie, topic, 0); got.Leader != pm.Leader || got.LeaderEpoch != pm.LeaderEpoch {
		t.Logf("the zombie's own metadata moved while it was isolated: %+v", got)
	}

	c.net.Heal()
	c.waitAcks(p, 50, 15*time.Second, "after the heal")
	p.finish()
	c.verify(topic, parts, p.l, forbidden)
	if ep := c.meta(zombie, topic, 0).LeaderEpoch; ep <= pm.LeaderEpoch {
		t.Fatalf("after the heal the zombie %d is at leader epoch %d, want past %d", zombie, ep, pm.LeaderEpoch)
	}
}

// TestReplicationFollowerRestarts: a follower of partition 0 is killed and restarted three
// times under the producer (the ISR shrinks to two, which min.insync.replicas=2 still accepts,
// and grows back once it catches up); nothing acknowledged is lost and it ends identical.
func TestReplicationFollowerRestarts(t *testing.T) {
	c := newRCluster(t, nil)
	const topic, parts = "restarts", 2
	c.createTopic(topic, parts, nil)
	p := c.startProducer(topic, parts, "r")
	c.waitAcks(p, 100, 15*time.Second, "before the first restart")
	for round := range 3 {
		pm := c.meta(c.live()[0], topic, 0)
		f := int(pm.Replicas[0])
		for _, r := range pm.Replicas {
			if r != pm.Leader {
				f = int(r)
				break
			}
		}
		c.kill(f)
		c.waitAcks(p, 50, 20*time.Second, fmt.Sprintf("round %d: with follower %d down", round, f))
		c.restart(f)
		waitFor(t, 20*time.Second, fmt.Sprintf("round %d: follower %d back in the ISR", round, f), func() bool {
			return slices.Contains(c.meta(c.live()[0], topic, 0).ISR, int32(f))
		})
		c.waitAcks(p, 50, 15*time.Second, fmt.Sprintf("round %d: after the restart of %d", round, f))
	}
	p.finish()
	c.verify(topic, parts, p.l, nil)
}

// TestReplicationMinISRRefusesWhenAlone is the Jepsen 2013 Kafka case: both followers are cut
// from the leader (replication only: the controller quorum still reaches it). An acks=all
// record sent just after the cut is never acknowledged (the high watermark cannot pass it);
// once the ISR has shrunk to the leader alone, acks=all is refused NOT_ENOUGH_REPLICAS with
// nothing appended, rather than accepted by the one replica and lost with it. After the heal
// the ISR grows back and acks=all is accepted again.
func TestReplicationMinISRRefusesWhenAlone(t *testing.T) {
	c := newRCluster(t, nil)
	const topic = "jepsen"
	c.createTopic(topic, 1, nil)
	leader := int(c.leaderOf(topic, 0))
	if r := c.sideProduce(leader, topic, 0, wire.AcksAll, "before", 10*time.Second); r.ErrorCode != wire.NoError {
		t.Fatalf("acks=all with the full ISR: %v", r.ErrorCode)
	}
	for f := range int32(3) {
		if f != int32(leader) {
			c.net.Cut(dataPlane+int32(leader), dataPlane+f)
		}
	}
	if r := c.sideProduce(leader, topic, 0, wire.AcksAll, "parked", 8*time.Second); r.ErrorCode == wire.NoError {
		t.Fatalf("acks=all acknowledged at offset %d while no follower could fetch it", r.BaseOffset)
	} else {
		t.Logf("acks=all just after the cut: %v", r.ErrorCode)
	}
	waitFor(t, 15*time.Second, fmt.Sprintf("the ISR to shrink to the leader %d alone", leader), func() bool {
		return slices.Equal(c.meta(leader, topic, 0).ISR, []int32{int32(leader)})
	})
	l := c.broker(leader).partition(topic, 0).log()
	before := l.EndOffset()
	if r := c.sideProduce(leader, topic, 0, wire.AcksAll, "refused", 5*time.Second); r.ErrorCode != wire.ErrNotEnoughReplicas {
		t.Fatalf("acks=all with the ISR at the leader alone and min.insync.replicas=2: %v, want NOT_ENOUGH_REPLICAS", r.ErrorCode)
	}
	if after := l.EndOffset(); after != before {
		t.Fatalf("a refused acks=all produce moved the log end from %d to %d", before, after)
	}

	c.net.Heal()
	waitFor(t, 20*time.Second, "the ISR to grow back to 3", func() bool { return len(c.meta(leader, topic, 0).ISR) == 3 })
	if r := c.sideProduce(leader, topic, 0, wire.AcksAll, "after", 10*time.Second); r.ErrorCode != wire.NoError {
		t.Fatalf("acks=all after the heal: %v", r.ErrorCode)
	}
	c.settle(topic, 1, 20*time.Second)
	_, st := c.settled(topic, 0)
	recs := logRecords(t, c.checkIdentical(topic, 0, st.leader, st.hw))
	var vals []string
	for _, v := range recs {
		vals = append(vals, v)
	}
	if slices.Contains(vals, "refused") || !slices.Contains(vals, "before") || !slices.Contains(vals, "after") {
		t.Fatalf("the log holds %v: want before and after, and never the refused record", vals)
	}
}

// TestReplicationOneWayLoss: the leader's answers to one follower are lost (its fetches still
// arrive, so the leader hears from it, but from an offset that no longer moves). The leader
// drops it from the ISR after replica.lag.time.max.ms, acks=all goes on with the other two
// (min.insync.replicas=2), and once the link heals it catches up and rejoins the ISR; nothing
// acknowledged is lost.
func TestReplicationOneWayLoss(t *testing.T) {
	c := newRCluster(t, nil)
	const topic = "oneway"
	c.createTopic(topic, 1, nil)
	p := c.startProducer(topic, 1, "o")
	c.waitAcks(p, 100, 15*time.Second, "before the loss")
	pm := c.meta(c.live()[0], topic, 0)
	var f int32 = -1
	for _, r := range pm.Replicas {
		if r != pm.Leader {
			f = r
			break
		}
	}
	c.net.Set(dataPlane+pm.Leader, dataPlane+f, faultnet.Rule{Drop: true})
	waitFor(t, 15*time.Second, fmt.Sprintf("follower %d out of the ISR while it hears nothing from the leader %d", f, pm.Leader), func() bool {
		return !slices.Contains(c.meta(c.live()[0], topic, 0).ISR, f)
	})
	c.waitAcks(p, 100, 15*time.Second, fmt.Sprintf("with follower %d out of the ISR", f))
	c.net.Heal()
	waitFor(t, 20*time.Second, fmt.Sprintf("follower %d back in the ISR", f), func() bool {
		return slices.Contains(c.meta(c.live()[0], topic, 0).ISR, f)
	})
	c.waitAcks(p, 50, 15*time.Second, "after the heal")
	p.finish()
	c.verify(topic, 1, p.l, nil)
}
