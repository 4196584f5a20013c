package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// TopicShape is how a driver creates the run's topics beyond their partitions: the
// replication factor and min.insync.replicas, 0 for the broker's defaults
// (default.replication.factor, min.insync.replicas: 1 each, as Kafka's).
type TopicShape struct {
	ReplicationFactor int
	MinInsyncReplicas int
}

// spec is the CreateTopic request of topic with partitions in this shape.
func (s TopicShape) spec(topic string, partitions int) client.TopicSpec {
	spec := client.TopicSpec{Name: topic, Partitions: int32(partitions), ReplicationFactor: int16(s.ReplicationFactor)}
	if s.MinInsyncReplicas > 0 {
		spec.Configs = map[string]string{"min.insync.replicas": strconv.Itoa(s.MinInsyncReplicas)}
	}
	return spec
}

// ClusterShape is a cluster of broker processes on this host that a run goes against, and how
// its topics are replicated. It names the cluster in the reports (Result.Cluster).
type ClusterShape struct {
	Brokers int
	TopicShape
}

// String is the shape for people: "3 brokers, RF 3, min.insync.replicas 2" (the broker's
// default, when the shape leaves it at 0, is said as such).
func (s ClusterShape) String() string {
	rf, isr := "the broker's default", "the broker's default"
	if s.ReplicationFactor > 0 {
		rf = strconv.Itoa(s.ReplicationFactor)
	}
	if s.MinInsyncReplicas > 0 {
		isr = strconv.Itoa(s.MinInsyncReplicas)
	}
	return fmt.Sprintf("%d brokers, RF %s, min.insync.replicas %s", s.Brokers, rf, isr)
}

// Check refuses a shape the cluster could not host: a replication factor above the brokers,
// min.insync.replicas above the replication factor (which topic creation refuses too, later
// and with less to say).
func (s ClusterShape) Check() error {
	switch {
	case s.Brokers < 1:
		return fmt.Errorf("bench: a cluster of %d brokers: want at least 1", s.Brokers)
	case s.ReplicationFactor < 0 || s.ReplicationFactor > s.Brokers:
		return fmt.Errorf("bench: replication factor %d on %d brokers: want 1 to %d", s.ReplicationFactor, s.Brokers, s.Brokers)
	case s.MinInsyncReplicas < 0 || s.MinInsyncReplicas > max(s.ReplicationFactor, 1):
		return fmt.Errorf("bench: min.insync.replicas %d above the replication factor %d: acks=all could never be answered", s.MinInsyncReplicas, max(s.ReplicationFactor, 1))
	}
	return nil
}

// ClusterBroker is one broker process of the cluster: its node id and its pid, from which its
// CPU time and peak RSS are read (/proc, Linux).
type ClusterBroker struct {
	ID  int32
	PID int
}

// ClusterSluice returns a driver for a running cluster of broker processes on this host:
// clients bootstrap from every broker's listener, the run's topics are created in shape, and
// the run's CPU counts every broker process's (BrokerCPUReader: their sum), with each one's
// peak RSS reported (BrokerRSSLister). The cluster is the caller's: the driver's Close closes
// only its admin connection.
func ClusterSluice(ctx context.Context, bootstrap []string, shape ClusterShape, brokers []ClusterBroker, logger *slog.Logger) (Driver, error) {
	if err := shape.Check(); err != nil {
		return nil, err
	}
	if len(bootstrap) == 0 || len(brokers) == 0 {
		return nil, errors.New("bench: a cluster driver needs the brokers' addresses and pids")
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	a, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: bootstrap, ClientID: "sluice-bench"}})
	if err != nil {
		return nil, fmt.Errorf("bench: connect to the cluster (%v): %w", bootstrap, err)
	}
	d := &SluiceDriver{name: "sluice-cluster", brokers: bootstrap, logger: logger, admin: a, topics: shape.TopicShape}
	return &clusterDriver{SluiceDriver: d, shape: shape, procs: brokers}, nil
}

// clusterDriver is the Sluice driver against a cluster of broker processes (ClusterSluice).
type clusterDriver struct {
	*SluiceDriver
	shape ClusterShape
	procs []ClusterBroker
}

// Unwrap lets driverAs find the Sluice driver's own optional interfaces (TopicDeleter).
func (d *clusterDriver) Unwrap() Driver { return d.SluiceDriver }

// BrokerCPU implements BrokerCPUReader: the CPU time of every broker process, summed; not ok
// if any cannot be read (one that died: the run's figure would be short by its time).
func (d *clusterDriver) BrokerCPU() (time.Duration, bool) {
	var sum time.Duration
	for _, p := range d.procs {
		cpu, ok := childCPU(p.PID)
		if !ok {
			return 0, false
		}
		sum += cpu
	}
	return sum, true
}

// BrokerRSSPeakMB implements BrokerCPUReader: the broker processes' peak RSS, summed (what
// the cluster holds of the machine's memory at most, if the peaks coincided).
func (d *clusterDriver) BrokerRSSPeakMB() float64 {
	var sum float64
	for _, mb := range d.BrokerRSSPeakMBEach() {
		sum += mb
	}
	return sum
}

// BrokerRSSPeakMBEach implements BrokerRSSLister.
func (d *clusterDriver) BrokerRSSPeakMBEach() []float64 {
	out := make([]float64, len(d.procs))
	for i, p := range d.procs {
		out[i] = procRSSPeakMB(p.PID)
	}
	return out
}

// Cluster implements ClusterDescriber.
func (d *clusterDriver) Cluster() string { return d.shape.String() }

// ReplicaPositions implements ReplicaPositionReader: each follower of topic's partitions as its
// leader describes it (Admin.DescribeReplicas: a metadata request, then one DescribeReplicas
// per leader). Partitions answered with an error (no leader, a leadership moving) and
// followers that have not fetched at the leader's epoch yet are left out; an error is returned
// with what was answered.
func (d *clusterDriver) ReplicaPositions(ctx context.Context, topic string) ([]ReplicaPosition, error) {
	ts, err := d.admin.DescribeReplicas(ctx, topic)
	return replicaPositions(ts), err
}

// replicaPositions is the followers' positions in a DescribeReplicas answer.
func replicaPositions(ts []wire.DescribeReplicasTopic) []ReplicaPosition {
	var out []ReplicaPosition
	for _, t := range ts {
		for _, p := range t.Partitions {
			if p.ErrorCode != wire.NoError || p.LogEndOffset < 0 {
				continue
			}
			for _, r := range p.Replicas {
				if r.ReplicaID == p.Leader || r.LogEndOffset < 0 {
					continue
				}
				out = append(out, ReplicaPosition{Partition: p.Partition, Follower: r.ReplicaID, LeaderLEO: p.LogEndOffset, FollowerLEO: r.LogEndOffset})
			}
		}
	}
	return out
}

// BrokerRSSLister is a Driver against several broker processes that reports each one's peak
// RSS (in the order of its brokers), which Result.BrokerRSSPeakMBEach keeps.
type BrokerRSSLister interface {
	BrokerRSSPeakMBEach() []float64
}

// ClusterDescriber is a Driver against a cluster that names its shape (Result.Cluster).
type ClusterDescriber interface {
	Cluster() string
}

// setBrokerFigures fills the figures of r that d's broker processes give: their peak RSS
// (summed, and each for a cluster) and the cluster's shape.
func setBrokerFigures(r *Result, d Driver) {
	r.BrokerRSSPeakMB = brokerRSSPeakMB(d)
	if l, ok := driverAs[BrokerRSSLister](d); ok {
		// One reading of each, so that the sum is of the figures listed.
		r.BrokerRSSPeakMBEach, r.BrokerRSSPeakMB = l.BrokerRSSPeakMBEach(), 0
		for _, mb := range r.BrokerRSSPeakMBEach {
			r.BrokerRSSPeakMB += mb
		}
	}
	if c, ok := driverAs[ClusterDescriber](d); ok {
		r.Cluster = c.Cluster()
	}
}

// procRSSPeakMB is a process's peak resident set (VmHWM) in MB, 0 where /proc does not say.
func procRSSPeakMB(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	return float64(parseVmHWM(b)) * 1024 / 1e6
}
