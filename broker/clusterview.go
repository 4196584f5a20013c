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
//
// TODO(lead): md.ClusterID() (the fsm stream's), falling back to defaultClusterID when empty.
func clusterID(md *cluster.Metadata) string { return defaultClusterID }

// brokerAlive reports whether a client may use br: registered and not fenced.
//
// TODO(lead): !br.Fenced (or br.State() alive / shutting down), the fsm stream's BrokerInfo state.
func brokerAlive(br cluster.BrokerInfo) bool { return true }

// metadataBroker is br as a Metadata response lists it.
func metadataBroker(br cluster.BrokerInfo) wire.MetadataBroker {
	return wire.MetadataBroker{NodeID: br.ID, Host: br.Host, Port: br.Port, UnixPath: br.UnixSocket}
}
