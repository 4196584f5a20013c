package broker

// Leader hints in Produce and Fetch responses (KIP-951): a partition refused with
// NOT_LEADER_OR_FOLLOWER (and, for fetch, FENCED_LEADER_EPOCH) names its leader and the leader's
// epoch, and the response lists the endpoints of the leaders it names, so that a client reroutes
// without waiting for a metadata refresh. Only the refusal path pays for them.

import (
	"slices"

	"github.com/sluicemq/sluice/net/wire"
)

// addHinted adds leader to the leaders a response names.
func addHinted(hinted []int32, leader int32) []int32 {
	if slices.Contains(hinted, leader) {
		return hinted
	}
	return append(hinted, leader)
}

// setProduceHint puts h in res and adds its leader to hinted.
func setProduceHint(res *wire.ProduceResponsePartition, h leaderHint, hinted []int32) []int32 {
	if !h.set {
		return hinted
	}
	setProduceLeader(res, h)
	return addHinted(hinted, h.id)
}

// setFetchHint puts h in res and adds its leader to hinted.
func setFetchHint(res *wire.FetchResponsePartition, h leaderHint, hinted []int32) []int32 {
	if !h.set {
		return hinted
	}
	setFetchLeader(res, h)
	return addHinted(hinted, h.id)
}

// endpoints appends to dst the endpoints of the hinted brokers that the metadata knows.
func (b *Broker) endpoints(dst []wire.MetadataBroker, hinted []int32) []wire.MetadataBroker {
	if len(hinted) == 0 {
		return dst
	}
	md := b.ctrl.Metadata()
	for _, id := range hinted {
		if br, ok := md.Broker(id); ok {
			dst = append(dst, metadataBroker(br))
		}
	}
	return dst
}
