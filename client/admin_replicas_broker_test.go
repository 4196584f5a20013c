package client_test

import (
	"errors"
	"testing"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// TestAdminDescribeReplicasBroker: against a real broker, DescribeReplicas gives each
// partition's log end and high watermark and the broker as the one in-sync replica; a missing
// topic is an error matching ErrUnknownTopic, beside the answers for the topics that exist.
func TestAdminDescribeReplicasBroker(t *testing.T) {
	_, ctx, a, _ := adminWithTopic(t, "dr", 2)
	got, err := a.DescribeReplicas(ctx, "dr")
	if err != nil || len(got) != 1 || len(got[0].Partitions) != 2 {
		t.Fatalf("DescribeReplicas: %+v, %v", got, err)
	}
	for _, p := range got[0].Partitions {
		if p.ErrorCode != wire.NoError || p.LogEndOffset != 0 || p.HighWatermark != 0 || len(p.ISR) != 1 || len(p.Replicas) != 1 || !p.Replicas[0].InISR {
			t.Errorf("partition %d: %+v", p.Partition, p)
		}
	}
	got, err = a.DescribeReplicas(ctx, "dr", "absent")
	if !errors.Is(err, client.ErrUnknownTopic) || len(got) != 1 || got[0].Topic != "dr" {
		t.Fatalf("with a missing topic: %+v, %v", got, err)
	}
}
