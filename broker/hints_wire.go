package broker

// The wire side of the leader hints (hints.go): wire.LeaderHint as CurrentLeader of
// ProduceResponsePartition and FetchResponsePartition, NodeEndpoints on ProduceResponse and
// FetchResponse (their v1; a v0 response encodes neither).

import "github.com/sluicemq/sluice/net/wire"

func setProduceLeader(res *wire.ProduceResponsePartition, h leaderHint) {
	res.CurrentLeader = wire.LeaderHint{LeaderID: h.id, LeaderEpoch: h.epoch}
}

func setFetchLeader(res *wire.FetchResponsePartition, h leaderHint) {
	res.CurrentLeader = wire.LeaderHint{LeaderID: h.id, LeaderEpoch: h.epoch}
}

// setProduceEndpoints sets resp's endpoints to the hinted leaders' (a pooled response: always
// set, to clear the last request's).
func (b *Broker) setProduceEndpoints(resp *wire.ProduceResponse, hinted []int32) {
	resp.NodeEndpoints = b.endpoints(resp.NodeEndpoints[:0], hinted)
}

// setFetchEndpoints sets resp's endpoints to the hinted leaders'.
func (b *Broker) setFetchEndpoints(resp *wire.FetchResponse, hinted []int32) {
	resp.NodeEndpoints = b.endpoints(resp.NodeEndpoints[:0], hinted)
}
