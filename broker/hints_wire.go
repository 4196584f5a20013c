package broker

// The wire side of the leader hints (hints.go). The KIP-951 fields (wire.LeaderHint as
// CurrentLeader of ProduceResponsePartition and FetchResponsePartition, NodeEndpoints on
// ProduceResponse and FetchResponse) come with the client's wire change; until it is merged,
// these set nothing.

import "github.com/sluicemq/sluice/net/wire"

func setProduceLeader(res *wire.ProduceResponsePartition, h leaderHint) {}

func setFetchLeader(res *wire.FetchResponsePartition, h leaderHint) {}

// setProduceEndpoints sets resp's endpoints to the hinted leaders' (a pooled response: always
// set, to clear the last request's).
func (b *Broker) setProduceEndpoints(resp *wire.ProduceResponse, hinted []int32) {}

// setFetchEndpoints sets resp's endpoints to the hinted leaders'.
func (b *Broker) setFetchEndpoints(resp *wire.FetchResponse, hinted []int32) {}
