package broker

// What the Metadata response says of the cluster beyond topics: its id and the brokers a
// client may use.

import (
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
)

// defaultClusterID is the id a Metadata response carries while the metadata records none (a
// data directory made before clusters had ids).
const defaultClusterID = "sluice"

// clusterID is the cluster's id as the metadata records it.
func clusterID(md *cluster.Metadata) string {
	if id := md.ClusterID(); id != "" {
		return id
	}
	return defaultClusterID
}

// brokerAlive reports whether a client may use br: registered and not fenced. A broker shutting
// down is listed: it still serves what it leads until the controller has moved it away.
func brokerAlive(br cluster.BrokerInfo) bool { return br.State() != cluster.BrokerFenced }

// metadataBroker is br as a Metadata response lists it.
func metadataBroker(br cluster.BrokerInfo) wire.MetadataBroker {
	return wire.MetadataBroker{NodeID: br.ID, Host: br.Host, Port: br.Port, UnixPath: br.UnixSocket}
}
