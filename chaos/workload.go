package chaos

import (
	"context"
	"time"
)

// Workload is what a run drives. Its JSON form is the --workload file (unknown fields are
// refused); zero fields take the defaults below.
type Workload struct {
	Topics            int `json:"topics"`              // topics chaos-0, chaos-1, ...: 2
	Partitions        int `json:"partitions"`          // per topic: 4
	ReplicationFactor int `json:"replication_factor"`  // 3 (at most the brokers)
	MinInsyncReplicas int `json:"min_insync_replicas"` // 2
	Writers           int `json:"writers"`             // producers, each its own writer id: 4
	Rate              int `json:"rate"`                // records per second over all writers: 400
	RecordSize        int `json:"record_size"`         // bytes per record value (padded): 100
	// MaxInFlight is each writer's requests in flight per broker: 1 (so a writer's values keep
	// their order in a partition without idempotence, which the checker then holds it to).
	MaxInFlight int `json:"max_in_flight"`
	// Readers read every partition by assignment: each tails the log (every record once, as
	// it comes) and, every RereadInterval, makes a pass from the log start to the end it sees
	// when the pass begins.
	Readers        int      `json:"readers"`         // 2
	RereadInterval Duration `json:"reread_interval"` // 0: a tenth of the run, at least 10 s
	// DeliveryTimeout is the writers' delivery.timeout.ms: 30 s.
	DeliveryTimeout Duration `json:"delivery_timeout"`
}

// Duration is a time.Duration that reads and writes as a Go duration string ("30s").
type Duration time.Duration

// ParseWorkload parses a --workload file: JSON, unknown fields refused, errors naming the
// field or the byte offset.
func ParseWorkload(b []byte) (Workload, error) { panic("chaos: stream E") }

// WithDefaults fills the zero fields and checks the rest (brokers is the cluster's size).
func (w Workload) WithDefaults(brokers int, runFor time.Duration) (Workload, error) {
	panic("chaos: stream E")
}

// TopicNames are the workload's topics.
func (w Workload) TopicNames() []string { panic("chaos: stream E") }

// CreateTopics creates the workload's topics (replication factor, min.insync.replicas,
// retention off so that the final read sees every record) and waits until every partition
// has a leader.
func CreateTopics(ctx context.Context, bootstrap []string, w Workload) error {
	panic("chaos: stream E")
}

// Workers are the running writers and readers. Stop ends them (the writers first, waiting for
// every send in flight to have its outcome recorded) and waits for their goroutines.
type Workers struct{}

// WorkerStats are the workers' counts so far, for progress lines.
type WorkerStats struct {
	Sent, Acknowledged, Failed int64
	Read                       int64
	LastAck                    time.Time
}

// StartWorkers starts w's writers and readers against the cluster at bootstrap, recording
// every send and read to rec.
func StartWorkers(ctx context.Context, bootstrap []string, w Workload, rec *Recorder) (*Workers, error) {
	panic("chaos: stream E")
}

// Stats are the counts so far.
func (ws *Workers) Stats() WorkerStats { panic("chaos: stream E") }

// Stop stops the workers: writers first (each send in flight gets its outcome), then readers.
func (ws *Workers) Stop(ctx context.Context) error { panic("chaos: stream E") }

// FinalRead reads every partition of w from its leader, from the log start to the high
// watermark, recording the records as EvRead events of FinalReader, and returns the high
// watermarks and log starts it read between. It retries a partition (from where it got to)
// until timeout while the cluster settles.
func FinalRead(ctx context.Context, bootstrap []string, w Workload, rec *Recorder, timeout time.Duration) (FinalState, error) {
	panic("chaos: stream E")
}

// CompareReplicas compares, for every partition of topics, each broker's log (read from the
// files under its data directory; the brokers are stopped) with the leader's, batch by batch
// (offsets, leader epoch, CRC) below hw, and lists where they differ. A replica whose log
// ends below hw is divergent only if it is in isr (a lagging replica outside it may be
// short, not different).
func CompareReplicas(dataDirs map[int32]string, topics []string, leaders map[TopicPartition]int32,
	isr map[TopicPartition][]int32, hw map[TopicPartition]int64) ([]Divergence, error) {
	panic("chaos: stream E")
}
