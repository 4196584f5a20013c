package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// Workload is what a run drives. Its JSON form is the --workload file (unknown fields are
// refused); zero fields take the defaults below.
type Workload struct {
	// Logger takes the clients' log lines (retries, reconnections); nil: slog's default.
	// Not part of the file.
	Logger *slog.Logger `json:"-"`

	Topics            int `json:"topics"`              // topics chaos-0, chaos-1, ...: 2
	Partitions        int `json:"partitions"`          // per topic: 4
	ReplicationFactor int `json:"replication_factor"`  // 3 (at most the brokers)
	MinInsyncReplicas int `json:"min_insync_replicas"` // 2
	Writers           int `json:"writers"`             // producers, each its own writer id: 4
	Rate              int `json:"rate"`                // records per second over all writers: 400
	RecordSize        int `json:"record_size"`         // bytes per record value (padded): 100
	// Idempotence is the writers' enable.idempotence (nil: true, the client's default). With
	// it the checker holds the run to no duplicates and to each writer's order in a partition.
	Idempotence *bool `json:"idempotence,omitempty"`
	// MaxInFlight is each writer's requests in flight per broker: 5 with idempotence (Kafka's
	// default, and its most), 1 without (so that a writer's values keep their order in a
	// partition, which the checker then holds it to).
	MaxInFlight int `json:"max_in_flight"`
	// Readers read every partition by assignment: each tails the log (every record once, as
	// it comes) and, every RereadInterval, makes a pass from the log start to the end it sees
	// when the pass begins.
	Readers        int      `json:"readers"`         // 2
	RereadInterval Duration `json:"reread_interval"` // 0: a tenth of the run, at least 10 s
	// DeliveryTimeout is the writers' delivery.timeout.ms: 30 s.
	DeliveryTimeout Duration `json:"delivery_timeout"`

	// GroupConsumers are consumers in one group (GroupID) subscribed to every topic, which
	// commit after processing and which the harness crashes and restarts (workload_group.go):
	// nil takes 3 when the workload has two partitions or more (else none), 0 turns them off.
	GroupConsumers *int `json:"group_consumers,omitempty"`
	// GroupAssignor is their partition.assignment.strategy: "cooperative-sticky" (the
	// default), "range" or "roundrobin".
	GroupAssignor string `json:"group_assignor,omitempty"`
	// GroupCrashInterval is the mean time between two crashes of one group consumer (the
	// times are drawn from Seed): 0 takes 15 s.
	GroupCrashInterval Duration `json:"group_crash_interval"`

	// Seed draws the group consumers' crashes (the run's --seed). Not part of the file.
	Seed uint64 `json:"-"`
}

// ErrWorkload: a workload file that does not parse, or a workload that cannot run on the
// cluster (the error names the field and the value).
var ErrWorkload = errors.New("chaos: invalid workload")

// TopicPrefix names the workload's topics: chaos-0, chaos-1, ...
const TopicPrefix = "chaos-"

// minRecordSize is the longest value a writer sends ("writer:seq" with a 4-digit writer and a
// 12-digit seq would be 17 bytes; 24 leaves room).
const minRecordSize = 24

// Duration is a time.Duration that reads and writes as a Go duration string ("30s").
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string ("30s", "1m30s"); a number or a negative duration is
// refused, naming the value.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\", not %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// ParseWorkload parses a --workload file: JSON, unknown fields refused, errors naming the
// field or the byte offset.
func ParseWorkload(b []byte) (Workload, error) {
	var w Workload
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Workload{}, fmt.Errorf("%w: %s", ErrWorkload, describeJSONError(err, b))
	}
	// One object and nothing after it: a second object would be silently ignored.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Workload{}, fmt.Errorf("%w: unexpected data after the workload object at byte offset %d", ErrWorkload, dec.InputOffset())
	}
	return w, nil
}

// describeJSONError says where a decoding error is: the field (unknown or of the wrong type),
// or the byte offset of a syntax error.
func describeJSONError(err error, b []byte) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("syntax error at byte offset %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q: %s is not a %s (byte offset %d)", typ.Field, typ.Value, typ.Type, typ.Offset)
	case errors.Is(err, io.EOF):
		return "empty file: a workload is a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("unexpected end of the file at byte offset %d", len(b))
	}
	// Unknown fields ("json: unknown field \"x\"") and Duration's own errors name the field
	// or the value already.
	return strings.TrimPrefix(err.Error(), "json: ")
}

// WithDefaults fills the zero fields and checks the rest (brokers is the cluster's size).
func (w Workload) WithDefaults(brokers int, runFor time.Duration) (Workload, error) {
	if brokers < 1 {
		return w, fmt.Errorf("%w: a cluster of %d brokers", ErrWorkload, brokers)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"topics", int64(w.Topics)}, {"partitions", int64(w.Partitions)},
		{"replication_factor", int64(w.ReplicationFactor)}, {"min_insync_replicas", int64(w.MinInsyncReplicas)},
		{"writers", int64(w.Writers)}, {"rate", int64(w.Rate)}, {"record_size", int64(w.RecordSize)},
		{"max_in_flight", int64(w.MaxInFlight)}, {"readers", int64(w.Readers)},
		{"reread_interval", int64(w.RereadInterval)}, {"delivery_timeout", int64(w.DeliveryTimeout)},
		{"group_consumers", int64(w.Groups())}, {"group_crash_interval", int64(w.GroupCrashInterval)},
	} {
		if f.v < 0 {
			return w, fmt.Errorf("%w: %s %d is negative (zero takes the default)", ErrWorkload, f.name, f.v)
		}
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&w.Topics, 2)
	def(&w.Partitions, 4)
	def(&w.Writers, 4)
	def(&w.Rate, 400)
	def(&w.RecordSize, 100)
	if w.Idempotence == nil {
		on := true
		w.Idempotence = &on
	}
	if w.Idempotent() {
		def(&w.MaxInFlight, 5)
	} else {
		def(&w.MaxInFlight, 1)
	}
	def(&w.Readers, 2)
	// The defaults shrink to a small cluster (a replication factor of 3 cannot be had from
	// one broker); a value given is held to.
	def(&w.ReplicationFactor, min(3, brokers))
	def(&w.MinInsyncReplicas, min(2, w.ReplicationFactor))
	if w.RereadInterval == 0 {
		w.RereadInterval = Duration(max(runFor/10, 10*time.Second))
	}
	if w.DeliveryTimeout == 0 {
		w.DeliveryTimeout = Duration(30 * time.Second)
	}
	if w.GroupConsumers == nil {
		n := 0
		if w.Topics*w.Partitions >= 2 {
			n = 3
		}
		w.GroupConsumers = &n
	}
	if w.GroupAssignor == "" {
		w.GroupAssignor = "cooperative-sticky"
	}
	if w.GroupCrashInterval == 0 {
		w.GroupCrashInterval = Duration(15 * time.Second)
	}
	switch {
	case w.ReplicationFactor > brokers:
		return w, fmt.Errorf("%w: replication_factor %d exceeds the %d brokers", ErrWorkload, w.ReplicationFactor, brokers)
	case w.ReplicationFactor > 32767:
		return w, fmt.Errorf("%w: replication_factor %d is too large", ErrWorkload, w.ReplicationFactor)
	case w.MinInsyncReplicas > w.ReplicationFactor:
		return w, fmt.Errorf("%w: min_insync_replicas %d exceeds replication_factor %d", ErrWorkload, w.MinInsyncReplicas, w.ReplicationFactor)
	case w.Partitions > 1<<16:
		return w, fmt.Errorf("%w: partitions %d is more than a run needs (at most 65536)", ErrWorkload, w.Partitions)
	case w.Topics > 1000:
		return w, fmt.Errorf("%w: topics %d is more than a run needs (at most 1000)", ErrWorkload, w.Topics)
	case w.RecordSize < minRecordSize:
		return w, fmt.Errorf("%w: record_size %d: a record must hold its value (writer:seq, up to %d bytes)", ErrWorkload, w.RecordSize, minRecordSize)
	case w.RecordSize > 1<<20:
		return w, fmt.Errorf("%w: record_size %d exceeds 1 MiB", ErrWorkload, w.RecordSize)
	case w.Idempotent() && w.MaxInFlight > 5:
		return w, fmt.Errorf("%w: max_in_flight %d: an idempotent producer keeps at most 5 requests in flight (its broker remembers 5 runs of batches per producer, one a request at most)", ErrWorkload, w.MaxInFlight)
	case w.Groups() > 100:
		return w, fmt.Errorf("%w: group_consumers %d is more than a run needs (at most 100)", ErrWorkload, w.Groups())
	case !slices.Contains(groupAssignors, w.GroupAssignor):
		return w, fmt.Errorf("%w: group_assignor %q: want %s", ErrWorkload, w.GroupAssignor, strings.Join(groupAssignors, ", "))
	case time.Duration(w.DeliveryTimeout) <= writerLinger:
		return w, fmt.Errorf("%w: delivery_timeout %v must exceed the writers' linger %v", ErrWorkload, time.Duration(w.DeliveryTimeout), writerLinger)
	}
	return w, nil
}

// Groups is the number of group consumers (GroupConsumers; 0 before WithDefaults when unset).
func (w Workload) Groups() int {
	if w.GroupConsumers == nil {
		return 0
	}
	return *w.GroupConsumers
}

// Idempotent reports whether the writers are idempotent (the default).
func (w Workload) Idempotent() bool { return w.Idempotence == nil || *w.Idempotence }

// CheckOptions are what the checker holds a run of the workload to: no duplicates with
// idempotence; a writer's order in a partition with idempotence or one request in flight.
func (w Workload) CheckOptions() CheckOptions {
	return CheckOptions{Idempotent: w.Idempotent(), Ordered: w.Idempotent() || w.MaxInFlight == 1}
}

// TopicNames are the workload's topics.
func (w Workload) TopicNames() []string {
	out := make([]string, w.Topics)
	for i := range out {
		out[i] = TopicPrefix + strconv.Itoa(i)
	}
	return out
}

// partitions are every partition of the workload, topic by topic.
func (w Workload) partitions() []client.TopicPartition {
	out := make([]client.TopicPartition, 0, w.Topics*w.Partitions)
	for _, t := range w.TopicNames() {
		for p := range w.Partitions {
			out = append(out, client.TopicPartition{Topic: t, Partition: int32(p)})
		}
	}
	return out
}

// CreateTopics creates the workload's topics (replication factor, min.insync.replicas,
// retention off so that the final read sees every record) and waits until every partition
// has a leader. A topic that exists already is taken as it is (a retried creation whose first
// answer was lost finds its own topic), provided it has the workload's partitions.
func CreateTopics(ctx context.Context, bootstrap []string, w Workload) error {
	admin, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: bootstrap, ClientID: "sluice-chaos-admin"}})
	if err != nil {
		return fmt.Errorf("chaos: create topics: %w", err)
	}
	defer admin.Close()
	for _, name := range w.TopicNames() {
		spec := client.TopicSpec{
			Name: name, Partitions: int32(w.Partitions), ReplicationFactor: int16(w.ReplicationFactor),
			Configs: map[string]string{
				"min.insync.replicas": strconv.Itoa(w.MinInsyncReplicas),
				"retention.ms":        "-1",
				"retention.bytes":     "-1",
			},
		}
		if err := admin.CreateTopic(ctx, spec); err != nil && !errors.Is(err, wire.ErrTopicAlreadyExists) {
			return fmt.Errorf("chaos: %w", err)
		}
	}
	return waitForLeaders(ctx, bootstrap, w)
}

// waitForLeaders polls the metadata until every partition of w has a leader, or ctx ends.
func waitForLeaders(ctx context.Context, bootstrap []string, w Workload) error {
	cl, err := client.NewClient(ctx, client.Config{Brokers: bootstrap, ClientID: "sluice-chaos-admin"})
	if err != nil {
		return fmt.Errorf("chaos: waiting for leaders: %w", err)
	}
	defer cl.Close()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		missing, err := leaderless(ctx, cl, w)
		if err == nil && len(missing) == 0 {
			return nil
		}
		if errors.Is(err, ErrWorkload) {
			return fmt.Errorf("chaos: %w", err) // waiting will not mend it
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("no leader for %s", strings.Join(missing, ", "))
			}
			return fmt.Errorf("chaos: waiting for leaders: %w: %w", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// leaderless names the partitions of w that have no leader in fresh metadata.
func leaderless(ctx context.Context, cl *client.Client, w Workload) ([]string, error) {
	if err := cl.RefreshMetadata(ctx); err != nil {
		return nil, err
	}
	var missing []string
	for _, name := range w.TopicNames() {
		tm, err := cl.Topic(ctx, name)
		if err != nil {
			return nil, err
		}
		if len(tm.Partitions) != w.Partitions {
			return nil, fmt.Errorf("%w: topic %s has %d partitions, the workload %d", ErrWorkload, name, len(tm.Partitions), w.Partitions)
		}
		for _, p := range tm.Partitions {
			if p.Leader < 0 {
				missing = append(missing, client.TopicPartition{Topic: name, Partition: p.Partition}.String())
			}
		}
	}
	return missing, nil
}
