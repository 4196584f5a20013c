package broker

import (
	"testing"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
)

// checkWireHints checks the KIP-951 fields of a v1 produce and fetch refused by a follower of
// topic's partition 0, led by leader at epoch: the partition names the leader and its epoch, the
// response the leader's endpoint; and a v0 answer has neither.
func checkWireHints(t *testing.T, c *client.Conn, topic string, leader cluster.BrokerInfo, epoch int32) {
	t.Helper()
	wantHint := wire.LeaderHint{LeaderID: leader.ID, LeaderEpoch: epoch}
	wantEndpoints := []wire.MetadataBroker{{NodeID: leader.ID, Host: leader.Host, Port: leader.Port}}
	sameEndpoints := func(got []wire.MetadataBroker) bool {
		return len(got) == 1 && got[0] == wantEndpoints[0]
	}
	for _, v := range []int16{0, 1} {
		pr := wire.ProduceResponse{Version: v}
		call(t, c, &wire.ProduceRequest{Version: v, Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
			{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, "hinted")}}},
		}}, &pr)
		res := pr.Topics[0].Partitions[0]
		fr := wire.FetchResponse{Version: v}
		call(t, c, &wire.FetchRequest{Version: v, ReplicaID: -1, MaxBytes: 1 << 20, Topics: []wire.FetchRequestTopic{
			{Topic: topic, Partitions: []wire.FetchRequestPartition{{Partition: 0, CurrentLeaderEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20}}},
		}}, &fr)
		fres := fr.Topics[0].Partitions[0]
		if res.ErrorCode != wire.ErrNotLeaderOrFollower || fres.ErrorCode != wire.ErrNotLeaderOrFollower {
			t.Fatalf("v%d: produce %v, fetch %v, want NOT_LEADER_OR_FOLLOWER", v, res.ErrorCode, fres.ErrorCode)
		}
		if v == 0 {
			if res.CurrentLeader.Known() || len(pr.NodeEndpoints) != 0 || fres.CurrentLeader.Known() || len(fr.NodeEndpoints) != 0 {
				t.Errorf("v0 answers carry hints: produce %+v %+v, fetch %+v %+v", res.CurrentLeader, pr.NodeEndpoints, fres.CurrentLeader, fr.NodeEndpoints)
			}
			continue
		}
		if res.CurrentLeader != wantHint || !sameEndpoints(pr.NodeEndpoints) {
			t.Errorf("v1 produce: leader %+v, endpoints %+v; want %+v at %+v", res.CurrentLeader, pr.NodeEndpoints, wantHint, wantEndpoints)
		}
		if fres.CurrentLeader != wantHint || !sameEndpoints(fr.NodeEndpoints) {
			t.Errorf("v1 fetch: leader %+v, endpoints %+v; want %+v at %+v", fres.CurrentLeader, fr.NodeEndpoints, wantHint, wantEndpoints)
		}
	}
}
