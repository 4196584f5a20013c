package broker

// Behavior: DescribeCluster.
//
// Answered by any broker from the metadata it has applied: the cluster id, the active
// controller, and every registered broker with its endpoints and state.

import (
	"cmp"
	"slices"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
)

func (b *Broker) handleDescribeCluster(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.DescribeClusterRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	md := b.ctrl.Metadata()
	resp := &wire.DescribeClusterResponse{ClusterID: clusterID(md), ControllerID: b.ctrl.ControllerID()}
	for _, br := range md.Brokers() {
		db := wire.DescribeClusterBroker{BrokerID: br.ID, Host: br.Host, Port: br.Port, UnixPath: br.UnixSocket, State: brokerState(br)}
		if br.Rack != "" {
			db.Rack = &br.Rack
		}
		resp.Brokers = append(resp.Brokers, db)
	}
	slices.SortFunc(resp.Brokers, func(x, y wire.DescribeClusterBroker) int { return cmp.Compare(x.BrokerID, y.BrokerID) })
	return respond(c, h, resp)
}

// brokerState is a registered broker's state on the wire.
func brokerState(br cluster.BrokerInfo) wire.BrokerState {
	switch br.State() {
	case cluster.BrokerFenced:
		return wire.BrokerFenced
	case cluster.BrokerShuttingDown:
		return wire.BrokerShuttingDown
	}
	return wire.BrokerAlive
}
