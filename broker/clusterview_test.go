package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// Metadata lists the registered brokers with their endpoints, the cluster id and the active
// controller, and per partition the leader, epoch, replicas and ISR as the metadata says.
func TestMetadataDescribesTheCluster(t *testing.T) {
	b, c := twoBrokers(t, testConfig(t, t.TempDir()))
	epoch := moveLeader(t, b, "t", 0, 2)
	var md wire.MetadataResponse
	call(t, c, &wire.MetadataRequest{Topics: []string{"t"}}, &md)
	if md.ClusterID == nil || *md.ClusterID != clusterID(b.Controller().Metadata()) {
		t.Errorf("cluster id %v", md.ClusterID)
	}
	if md.ControllerID != 1 {
		t.Errorf("controller %d, want 1", md.ControllerID)
	}
	if len(md.Brokers) != 2 || md.Brokers[0].NodeID != 1 || md.Brokers[1] != (wire.MetadataBroker{NodeID: 2, Host: "127.0.0.1", Port: 19092}) {
		t.Errorf("brokers %+v, want 1 and 2 (127.0.0.1:19092)", md.Brokers)
	}
	mp := md.Topics[0].Partitions[0]
	if mp.ErrorCode != wire.NoError || mp.Leader != 2 || mp.LeaderEpoch != epoch || len(mp.Replicas) != 2 || len(mp.ISR) != 2 {
		t.Errorf("partition %+v, want leader 2 at epoch %d, replicas and ISR [1 2]", mp, epoch)
	}

	// A fenced broker is not listed (its partitions' leadership moves away).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	br, _ := b.Controller().Metadata().Broker(2)
	if err := b.Controller().FenceBroker(ctx, 2, br.Epoch); err != nil {
		t.Fatal(err)
	}
	md = wire.MetadataResponse{}
	call(t, c, &wire.MetadataRequest{Topics: []string{"t"}}, &md)
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != 1 {
		t.Errorf("brokers with broker 2 fenced: %+v, want 1 only", md.Brokers)
	}
	if mp := md.Topics[0].Partitions[0]; mp.Leader != 1 {
		t.Errorf("leader with broker 2 fenced: %d, want 1", mp.Leader)
	}
}

// CreateTopics: replication factor 0 is refused, naming it; -1 takes default.replication.factor.
func TestCreateTopicsReplicationFactor(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	for _, validate := range []bool{true, false} {
		var resp wire.CreateTopicsResponse
		call(t, c, &wire.CreateTopicsRequest{TimeoutMs: 10000, ValidateOnly: validate, Topics: []wire.CreateTopicsRequestTopic{
			{Topic: "zero", NumPartitions: 1, ReplicationFactor: 0},
		}}, &resp)
		r := resp.Topics[0]
		if r.ErrorCode != wire.ErrInvalidReplicationFactor || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "replication factor 0") {
			t.Errorf("validate=%v: replication factor 0: %v %q, want INVALID_REPLICATION_FACTOR naming it", validate, r.ErrorCode, deref(r.ErrorMessage))
		}
	}
	if _, ok := b.Controller().Metadata().Topic("zero"); ok {
		t.Fatal("a topic of replication factor 0 was created")
	}
	createTopic(t, c, "default", 1) // ReplicationFactor -1
	tm, _ := b.Controller().Metadata().Topic("default")
	if n := len(tm.Partitions[0].Replicas); n != 1 {
		t.Fatalf("replication factor -1 made %d replicas, want default.replication.factor (1)", n)
	}
}
