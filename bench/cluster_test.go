package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// TestClusterShapeCheck: a shape the cluster could not host is refused before anything
// starts; the others pass, and the shape names itself as the reports do.
func TestClusterShapeCheck(t *testing.T) {
	for _, c := range []struct {
		shape ClusterShape
		ok    bool
	}{
		{ClusterShape{Brokers: 3, TopicShape: TopicShape{ReplicationFactor: 3, MinInsyncReplicas: 2}}, true},
		{ClusterShape{Brokers: 3, TopicShape: TopicShape{ReplicationFactor: 1}}, true},
		{ClusterShape{Brokers: 1}, true},
		{ClusterShape{Brokers: 0}, false},
		{ClusterShape{Brokers: 3, TopicShape: TopicShape{ReplicationFactor: 4}}, false},
		{ClusterShape{Brokers: 3, TopicShape: TopicShape{ReplicationFactor: 2, MinInsyncReplicas: 3}}, false},
		{ClusterShape{Brokers: 3, TopicShape: TopicShape{MinInsyncReplicas: 2}}, false}, // the default RF is 1
		{ClusterShape{Brokers: 3, TopicShape: TopicShape{ReplicationFactor: -1}}, false},
	} {
		if err := c.shape.Check(); (err == nil) != c.ok {
			t.Errorf("%+v: Check() = %v, want ok %v", c.shape, err, c.ok)
		}
	}
	if got, want := (ClusterShape{Brokers: 3, TopicShape: TopicShape{ReplicationFactor: 3, MinInsyncReplicas: 2}}).String(),
		"3 brokers, RF 3, min.insync.replicas 2"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (ClusterShape{Brokers: 3, TopicShape: TopicShape{ReplicationFactor: 3}}).String(); !strings.Contains(got, "min.insync.replicas the broker's default") {
		t.Errorf("String() = %q: want the default min.insync.replicas said as such", got)
	}
}

// TestClusterDriverRun: a run through the cluster driver creates its topic in the shape
// (min.insync.replicas as a topic config), produces through the bootstrap list (the dead
// first address passed over), and its result names the cluster and counts every broker
// process: here two "brokers" that are this test's own process, so the CPU and the RSS are
// this process's twice over.
func TestClusterDriverRun(t *testing.T) {
	br := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shape := ClusterShape{Brokers: 1, TopicShape: TopicShape{ReplicationFactor: 1, MinInsyncReplicas: 1}}
	self := []ClusterBroker{{ID: 0, PID: os.Getpid()}, {ID: 1, PID: os.Getpid()}}
	d, err := ClusterSluice(ctx, []string{"127.0.0.1:1", br.Addr().String()}, shape, self, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Name() != "sluice-cluster" {
		t.Errorf("Name() = %q", d.Name())
	}
	if _, ok := driverAs[TopicDeleter](d); !ok {
		t.Error("the cluster driver is not a TopicDeleter: --rate-of-max probes would leave their topics")
	}
	r, err := Produce(ctx, d, Config{Topic: "shaped", Partitions: 2, CreateTopic: true, Records: 2000, RecordSize: 100, Producers: 1, Acks: -1, AcksSet: true, Compression: "none", BatchSize: 16384, LingerMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != 2000 || r.Errors != 0 {
		t.Fatalf("%d records, %d errors (%s)", r.Records, r.Errors, r.FirstError)
	}
	if r.Cluster != shape.String() {
		t.Errorf("Cluster = %q, want %q", r.Cluster, shape.String())
	}
	a, err := client.NewAdmin(ctx, br.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	info, cfgs, err := a.DescribeTopic(ctx, "shaped")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Partitions) != 2 {
		t.Errorf("%d partitions, want 2", len(info.Partitions))
	}
	var isr string
	for _, e := range cfgs {
		if e.Name == "min.insync.replicas" && e.Value != nil {
			isr = *e.Value
		}
	}
	if isr != "1" {
		t.Errorf("min.insync.replicas = %q, want the shape's 1", isr)
	}
	var out bytes.Buffer
	r.WriteSummary(&out)
	if !strings.Contains(out.String(), "(1 brokers, RF 1, min.insync.replicas 1)") {
		t.Errorf("summary does not name the cluster:\n%s", out.String())
	}
	b, _ := json.Marshal(r)
	if !bytes.Contains(b, []byte(`"cluster":"1 brokers, RF 1, min.insync.replicas 1"`)) {
		t.Errorf("JSON does not name the cluster: %s", b)
	}
	if runtime.GOOS != "linux" {
		return
	}
	if r.BrokerCPUSeconds <= 0 || r.CPUSeconds < r.BrokerCPUSeconds {
		t.Errorf("cpu %v s, broker processes %v s: want the brokers' part, above zero", r.CPUSeconds, r.BrokerCPUSeconds)
	}
	if len(r.BrokerRSSPeakMBEach) != 2 || r.BrokerRSSPeakMBEach[0] <= 0 || r.BrokerRSSPeakMB != r.BrokerRSSPeakMBEach[0]+r.BrokerRSSPeakMBEach[1] {
		t.Errorf("broker RSS %v MB, each %v: want each process's and their sum", r.BrokerRSSPeakMB, r.BrokerRSSPeakMBEach)
	}
	if !strings.Contains(out.String(), "broker processes' peak RSS") {
		t.Errorf("summary does not list the brokers' RSS:\n%s", out.String())
	}
}

// The followers' positions come from each partition's leader's answer: the leader itself, a
// follower that has not fetched at the epoch, and a partition answered with an error are left
// out.
func TestReplicaPositions(t *testing.T) {
	got := replicaPositions([]wire.DescribeReplicasTopic{{Topic: "t", Partitions: []wire.DescribeReplicasPartition{
		{Partition: 0, Leader: 1, LogEndOffset: 500, Replicas: []wire.DescribeReplicasReplica{
			{ReplicaID: 1, LogEndOffset: 500}, {ReplicaID: 2, LogEndOffset: 480}, {ReplicaID: 3, LogEndOffset: -1},
		}},
		{Partition: 1, ErrorCode: wire.ErrLeaderNotAvailable, Leader: -1, LogEndOffset: -1},
		{Partition: 2, Leader: 3, LogEndOffset: 70, Replicas: []wire.DescribeReplicasReplica{
			{ReplicaID: 3, LogEndOffset: 70}, {ReplicaID: 1, LogEndOffset: 70},
		}},
	}}})
	want := []ReplicaPosition{
		{Partition: 0, Follower: 2, LeaderLEO: 500, FollowerLEO: 480},
		{Partition: 2, Follower: 1, LeaderLEO: 70, FollowerLEO: 70},
	}
	if !slices.Equal(got, want) {
		t.Errorf("replicaPositions = %+v, want %+v", got, want)
	}
}
