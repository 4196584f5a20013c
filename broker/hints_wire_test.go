package broker

import (
	"testing"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
)

// checkWireHints checks the KIP-951 fields of a produce and a fetch refused by a follower of
// topic's partition 0 led by leader at epoch. Until the wire change is merged, there are none.
func checkWireHints(t *testing.T, c *client.Conn, topic string, leader cluster.BrokerInfo, epoch int32) {
}
