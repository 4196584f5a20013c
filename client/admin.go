package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// Admin manages topics, and reads and moves offsets, through one broker connection at a time:
// when that connection fails (its broker stopped, or closed it), the next call dials the next
// bootstrap broker that answers.
type Admin struct {
	cfg AdminConfig
	// mdVersion is the Metadata version DescribeTopic uses, plus one; 0 until asked.
	mdVersion atomic.Int32

	// mu guards conn and closed; connection holds it while it dials, so that concurrent
	// calls after a failure share one new connection.
	mu     sync.Mutex
	conn   *Conn // the connection calls use; replaced once it has failed
	closed bool
}

// AdminConfig configures an Admin (NewAdminWithConfig). Of Config it uses Brokers (the first
// that answers), ClientID and RequestTimeout; zero values take Kafka's defaults.
type AdminConfig struct {
	Config
	// DefaultAPITimeout is default.api.timeout.ms (60 s): the bound on a call whose context
	// has no deadline, so that one made with context.Background() against a broker that has
	// gone away ends, with an error matching context.DeadlineExceeded.
	DefaultAPITimeout time.Duration
}

// NewAdmin dials addr ("host:port" or "unix:///path", as ParseAddress takes) for
// administration, with AdminConfig's defaults: NewAdminWithConfig with addr as the one
// bootstrap broker.
func NewAdmin(ctx context.Context, addr string) (*Admin, error) {
	return NewAdminWithConfig(ctx, AdminConfig{Config: Config{Brokers: []string{addr}, ClientID: "sluice-admin"}})
}

// NewAdminWithConfig dials the first of cfg.Brokers that answers. An Admin keeps that one
// connection (it does not follow the cluster's metadata to other brokers: on a cluster of one
// broker, the only one) and is safe for concurrent use; Close closes it. A negative timeout is
// an error wrapping ErrAdminConfig; no reachable broker one wrapping ErrNoBrokers.
func NewAdminWithConfig(ctx context.Context, cfg AdminConfig) (*Admin, error) {
	if cfg.RequestTimeout < 0 || cfg.DefaultAPITimeout < 0 {
		return nil, fmt.Errorf("%w: request.timeout.ms and default.api.timeout.ms cannot be negative (zero takes the default)", ErrAdminConfig)
	}
	cfg.Config = cfg.Config.withDefaults()
	if cfg.DefaultAPITimeout == 0 {
		cfg.DefaultAPITimeout = 60 * time.Second
	}
	if len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("%w: Config.Brokers is empty", ErrNoBrokers)
	}
	ctx, cancel := apiContext(ctx, cfg.DefaultAPITimeout)
	defer cancel()
	// The bootstrap brokers in order, each until one answers (ApiVersions, which also tells
	// the Metadata version to use): one that accepts the connection and never answers costs
	// request.timeout.ms, not the whole default.api.timeout.ms.
	var errs []error
	for _, addr := range cfg.Brokers {
		c, err := dialBounded(ctx, cfg.Dial, addr, cfg.ClientID, cfg.RequestTimeout)
		if err == nil {
			a := &Admin{conn: c, cfg: cfg}
			if _, err = a.metadataVersion(ctx); err == nil {
				return a, nil
			}
			_ = c.Close()
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, noBrokersErr(cfg.Brokers, errs)
}

// ErrAdminConfig: an AdminConfig that cannot be used.
var ErrAdminConfig = errors.New("client: invalid admin config")

// apiContext bounds ctx by d if it has no deadline.
func apiContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// call makes one request on the Admin's connection, bounded by ctx, or DefaultAPITimeout
// without a deadline. A request whose connection fails is not sent again (whether the broker
// acted on it is unknown, and the caller's to judge): the next call goes to another broker.
func (a *Admin) call(ctx context.Context, req wire.Request, resp wire.Response) error {
	ctx, cancel := apiContext(ctx, a.cfg.DefaultAPITimeout)
	defer cancel()
	conn, err := a.connection(ctx)
	if err != nil {
		return err
	}
	return conn.callWithin(ctx, a.cfg.RequestTimeout, req, resp)
}

// connection is the Admin's connection while it is up; after it has failed, one to the first
// bootstrap broker that answers, tried in order from the one after the failed connection's
// (so that a broker that has gone is tried last).
func (a *Admin) connection(ctx context.Context) (*Conn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClientClosed
	}
	if !a.conn.isClosed() {
		return a.conn, nil
	}
	brokers := a.cfg.Brokers
	if i := slices.Index(brokers, a.conn.Addr()); i >= 0 {
		brokers = append(slices.Clone(brokers[i+1:]), brokers[:i+1]...)
	}
	var errs []error
	for _, addr := range brokers {
		c, err := dialBounded(ctx, a.cfg.Dial, addr, a.cfg.ClientID, a.cfg.RequestTimeout)
		if err == nil {
			_ = a.conn.Close()
			a.conn = c
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("client: admin: its connection failed (%w) and %w", a.conn.closedErr(), noBrokersErr(brokers, errs))
}

// timeoutMs is the time the broker may take for a topic's creation or deletion: the
// request timeout, in Kafka's milliseconds.
func (a *Admin) timeoutMs() int32 {
	return int32(min(a.cfg.RequestTimeout.Milliseconds(), math.MaxInt32))
}

// Close closes the connection; calls afterwards fail with ErrClientClosed.
func (a *Admin) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	return a.conn.Close()
}

// TopicSpec describes a topic to create. Partitions and ReplicationFactor <= 0 take the
// broker's defaults.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Assignment        [][]int32 // optional replicas per partition
	Configs           map[string]string
}

// resultErr is the error of a response's error code and message (nil for NoError) for op (such
// as `create topic "orders"`). The broker's message names the operation and the topic; without
// one, op is the context. A missing topic also matches ErrUnknownTopic, as the Producer's and
// Consumer's errors do, so that an application tests for one sentinel whichever API it called;
// the code stays matchable too.
func resultErr(op string, code wire.ErrorCode, msg *string) error {
	if code == wire.NoError {
		return nil
	}
	return fmt.Errorf("%s: %w", op, codeErr(code, msg))
}

// topicOp names an operation on a topic for resultErr.
func topicOp(op, topic string) string { return fmt.Sprintf("%s %.300q", op, topic) }

func entries(m map[string]string) []wire.ConfigEntry {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]wire.ConfigEntry, 0, len(keys))
	for _, k := range keys {
		v := m[k]
		out = append(out, wire.ConfigEntry{Name: k, Value: &v})
	}
	return out
}

// CreateTopic creates a topic; the error wraps the broker's error code (errors.Is with
// wire.ErrTopicAlreadyExists, wire.ErrInvalidTopicException, wire.ErrInvalidConfig,
// wire.ErrInvalidReplicationFactor, ...) and says why.
func (a *Admin) CreateTopic(ctx context.Context, spec TopicSpec) error {
	t := wire.CreateTopicsRequestTopic{Topic: spec.Name, NumPartitions: spec.Partitions, ReplicationFactor: spec.ReplicationFactor, Configs: entries(spec.Configs)}
	if t.NumPartitions <= 0 {
		t.NumPartitions = -1
	}
	if t.ReplicationFactor <= 0 {
		t.ReplicationFactor = -1
	}
	for p, replicas := range spec.Assignment {
		t.Assignments = append(t.Assignments, wire.CreateTopicsAssignment{Partition: int32(p), Replicas: replicas})
	}
	op := topicOp("create topic", spec.Name)
	var resp wire.CreateTopicsResponse
	if err := a.call(ctx, &wire.CreateTopicsRequest{Topics: []wire.CreateTopicsRequestTopic{t}, TimeoutMs: a.timeoutMs()}, &resp); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("%s: %d results for 1 topic", op, len(resp.Topics))
	}
	return resultErr(op, resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
}

// DeleteTopic deletes a topic and its data. A missing topic is an error wrapping
// ErrUnknownTopic (and wire.ErrUnknownTopicOrPartition); an internal one wraps
// wire.ErrInvalidTopicException.
func (a *Admin) DeleteTopic(ctx context.Context, name string) error {
	op := topicOp("delete topic", name)
	var resp wire.DeleteTopicsResponse
	if err := a.call(ctx, &wire.DeleteTopicsRequest{Topics: []string{name}, TimeoutMs: a.timeoutMs()}, &resp); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("%s: %d results for 1 topic", op, len(resp.Topics))
	}
	return resultErr(op, resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
}

// TopicInfo is a topic as Metadata describes it.
type TopicInfo struct {
	Name       string
	Internal   bool
	Partitions []wire.MetadataPartition
}

// ListTopics returns every topic, sorted by name.
func (a *Admin) ListTopics(ctx context.Context) ([]TopicInfo, error) {
	var resp wire.MetadataResponse
	if err := a.call(ctx, &wire.MetadataRequest{}, &resp); err != nil {
		return nil, err
	}
	out := make([]TopicInfo, 0, len(resp.Topics))
	for _, t := range resp.Topics {
		out = append(out, TopicInfo{Name: t.Topic, Internal: t.IsInternal, Partitions: t.Partitions})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DescribeTopic returns a topic's partitions and its effective configuration: every topic
// config, with its Source (wire.ConfigSourceDynamicTopic for the topic's own overrides). A
// missing topic is an error wrapping ErrUnknownTopic (and wire.ErrUnknownTopicOrPartition).
func (a *Admin) DescribeTopic(ctx context.Context, name string) (TopicInfo, []wire.DescribeConfigsEntry, error) {
	op := topicOp("describe topic", name)
	v, err := a.metadataVersion(ctx)
	if err != nil {
		return TopicInfo{}, nil, fmt.Errorf("%s: %w", op, err)
	}
	md := wire.MetadataResponse{Version: v}
	if err := a.call(ctx, &wire.MetadataRequest{Version: v, Topics: []string{name}}, &md); err != nil {
		return TopicInfo{}, nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(md.Topics) != 1 {
		return TopicInfo{}, nil, fmt.Errorf("%s: %d topics in the answer", op, len(md.Topics))
	}
	t := md.Topics[0]
	if err := resultErr(op, t.ErrorCode, nil); err != nil {
		return TopicInfo{}, nil, err
	}
	cfgs, err := a.topicConfigs(ctx, op, name)
	if err != nil {
		return TopicInfo{}, nil, err
	}
	return TopicInfo{Name: t.Topic, Internal: t.IsInternal, Partitions: t.Partitions}, cfgs, nil
}

// metadataVersion is the Metadata version to ask the broker in: 1 (with corruptReplicas) if it
// implements it, 0 otherwise; asked once (ApiVersions) and remembered.
func (a *Admin) metadataVersion(ctx context.Context) (int16, error) {
	if v := a.mdVersion.Load(); v > 0 {
		return int16(v - 1), nil
	}
	var versions wire.APIVersionsResponse
	if err := a.call(ctx, &wire.APIVersionsRequest{}, &versions); err != nil {
		return 0, err
	}
	v := int16(0)
	for _, r := range versions.APIKeys {
		if r.APIKey == wire.Metadata && r.MaxVersion >= 1 && r.MinVersion <= 1 {
			v = 1
		}
	}
	a.mdVersion.Store(int32(v) + 1)
	return v, nil
}

// topicConfigs is DescribeConfigs of one topic, for op.
func (a *Admin) topicConfigs(ctx context.Context, op, name string) ([]wire.DescribeConfigsEntry, error) {
	var dc wire.DescribeConfigsResponse
	if err := a.call(ctx, &wire.DescribeConfigsRequest{Resources: []wire.DescribeConfigsResource{{ResourceType: wire.ResourceTopic, ResourceName: name}}}, &dc); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(dc.Resources) != 1 {
		return nil, fmt.Errorf("%s: describe configs: %d results", op, len(dc.Resources))
	}
	r := dc.Resources[0]
	if err := resultErr(op, r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, err
	}
	return r.Configs, nil
}

// AlterTopicConfigs sets the overrides in set and removes those named in del (the topic then
// takes the broker's default; a name in both is set), keeping the overrides it names in
// neither: it reads the current overrides and sends the merged set, because AlterConfigs
// replaces a topic's overrides wholesale. Removing a config that is not overridden does
// nothing. A missing topic is an error wrapping ErrUnknownTopic (and
// wire.ErrUnknownTopicOrPartition); an unknown config or a bad value one wrapping
// wire.ErrInvalidConfig.
func (a *Admin) AlterTopicConfigs(ctx context.Context, name string, set map[string]string, del []string) error {
	op := topicOp("alter configs of topic", name)
	cfgs, err := a.topicConfigs(ctx, op, name)
	if err != nil {
		return err
	}
	merged := map[string]string{}
	for _, e := range cfgs {
		if e.Source == wire.ConfigSourceDynamicTopic && e.Value != nil {
			merged[e.Name] = *e.Value
		}
	}
	for _, k := range del {
		delete(merged, k)
	}
	for k, v := range set {
		merged[k] = v
	}
	var resp wire.AlterConfigsResponse
	req := &wire.AlterConfigsRequest{Resources: []wire.AlterConfigsResource{{ResourceType: wire.ResourceTopic, ResourceName: name, Configs: entries(merged)}}}
	if err := a.call(ctx, req, &resp); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if len(resp.Resources) != 1 {
		return fmt.Errorf("%s: %d results", op, len(resp.Resources))
	}
	return resultErr(op, resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage)
}

// OffsetSpec is what Admin.ListOffsets looks up in a partition (Kafka's OffsetSpec): the log's
// start (OffsetEarliest), its end (OffsetLatest: the high watermark, the offset the next record
// will get), the record with the largest timestamp (OffsetMaxTimestamp), or the first record at
// or after a time (OffsetAt).
type OffsetSpec struct{ ts int64 }

var (
	OffsetEarliest     = OffsetSpec{wire.EarliestTimestamp}
	OffsetLatest       = OffsetSpec{wire.LatestTimestamp}
	OffsetMaxTimestamp = OffsetSpec{wire.MaxTimestamp}
)

// OffsetAt looks up the first record whose timestamp is at or after t (a time before 1970 is
// 1970: Kafka's timestamps are milliseconds since then).
func OffsetAt(t time.Time) OffsetSpec { return OffsetSpec{max(t.UnixMilli(), 0)} }

// String names the spec as the CLI takes it: earliest, latest, max-timestamp, or milliseconds
// since 1970.
func (s OffsetSpec) String() string {
	switch s.ts {
	case wire.EarliestTimestamp:
		return "earliest"
	case wire.LatestTimestamp:
		return "latest"
	case wire.MaxTimestamp:
		return "max-timestamp"
	}
	return strconv.FormatInt(s.ts, 10)
}

// ListedOffset is what ListOffsets found in a partition.
type ListedOffset struct {
	// Offset is the offset found; -1 when a time was asked for and no record is at or after
	// it (a consumer that seeks there goes to the end).
	Offset int64
	// Timestamp is the found record's timestamp (ms since 1970) for OffsetAt and
	// OffsetMaxTimestamp, -1 for the others or when none was found.
	Timestamp int64
	// LeaderEpoch is the epoch of the leader that wrote the found record's batch, -1 if
	// unknown.
	LeaderEpoch int32
}

// ListOffsets looks up one offset per partition (Kafka's Admin.listOffsets; kafka-get-offsets
// on the command line): the log start offset, the high watermark, or the offset at a time, as
// specs says. With a consumer's committed offsets, the high watermarks give its lag. The
// partitions that could not be looked up are left out of the result, and the error joins one
// error per partition, naming it and wrapping the broker's code (a missing topic or partition
// also matches ErrUnknownTopic). Each partition is asked at its leader, found in the metadata
// of the Admin's broker (on a connection dialled for the call when that is another broker);
// one without a known leader is asked at the Admin's broker, which says why.
func (a *Admin) ListOffsets(ctx context.Context, specs map[TopicPartition]OffsetSpec) (map[TopicPartition]ListedOffset, error) {
	out := make(map[TopicPartition]ListedOffset, len(specs))
	if len(specs) == 0 {
		return out, nil
	}
	ctx, cancel := apiContext(ctx, a.cfg.DefaultAPITimeout)
	defer cancel()
	var topics []string
	for tp := range specs {
		topics = append(topics, tp.Topic)
	}
	sort.Strings(topics)
	topics = slices.Compact(topics)
	var md wire.MetadataResponse
	if err := a.call(ctx, &wire.MetadataRequest{Topics: topics}, &md); err != nil {
		return out, fmt.Errorf("list offsets: %w", err)
	}
	leaders := map[TopicPartition]int32{}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			leaders[TopicPartition{t.Topic, p.Partition}] = p.Leader
		}
	}
	byLeader := map[int32]map[TopicPartition]OffsetSpec{}
	for tp, spec := range specs {
		id, ok := leaders[tp]
		if !ok || id < 0 {
			id = -1 // the Admin's broker answers why
		}
		if byLeader[id] == nil {
			byLeader[id] = map[TopicPartition]OffsetSpec{}
		}
		byLeader[id][tp] = spec
	}
	ids := make([]int32, 0, len(byLeader))
	for id := range byLeader {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var errs []error
	for _, id := range ids {
		var conn *Conn
		release := func() {}
		var err error
		if id < 0 { // no leader known: the Admin's own broker answers
			conn, err = a.connection(ctx)
		} else {
			conn, release, err = a.brokerConn(ctx, md.Brokers, id)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list offsets at broker %d: %w", id, err))
			continue
		}
		call := func(ctx context.Context, req wire.Request, resp wire.Response) error {
			return conn.callWithin(ctx, a.cfg.RequestTimeout, req, resp)
		}
		if err := listOffsets(ctx, call, byLeader[id], out); err != nil {
			errs = append(errs, err)
		}
		release()
	}
	return out, errors.Join(errs...)
}

// listOffsets asks one broker, through call, for the offsets specs names (one ListOffsets
// request), and adds what it finds to out. The error joins one per partition not found,
// naming it (a missing topic or partition also matches ErrUnknownTopic).
func listOffsets(ctx context.Context, call func(context.Context, wire.Request, wire.Response) error, specs map[TopicPartition]OffsetSpec, out map[TopicPartition]ListedOffset) error {
	tps := make([]TopicPartition, 0, len(specs))
	for tp := range specs {
		tps = append(tps, tp)
	}
	if len(tps) == 0 {
		return nil
	}
	sortTopicPartitions(tps)
	req := &wire.ListOffsetsRequest{ReplicaID: wire.ConsumerReplicaID}
	for _, tp := range tps {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
			req.Topics = append(req.Topics, wire.ListOffsetsRequestTopic{Topic: tp.Topic})
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, wire.ListOffsetsRequestPartition{Partition: tp.Partition, CurrentLeaderEpoch: -1, Timestamp: specs[tp].ts})
	}
	var resp wire.ListOffsetsResponse
	if err := call(ctx, req, &resp); err != nil {
		return fmt.Errorf("list offsets: %w", err)
	}
	answers := make(map[TopicPartition]*wire.ListOffsetsResponsePartition, len(tps))
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			answers[TopicPartition{t.Topic, t.Partitions[pi].Partition}] = &t.Partitions[pi]
		}
	}
	var errs []error
	for _, tp := range tps {
		p, ok := answers[tp]
		op := fmt.Sprintf("list offsets of %s (%s)", tp, specs[tp])
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: no answer from the broker", op))
		case p.ErrorCode != wire.NoError:
			errs = append(errs, resultErr(op, p.ErrorCode, nil))
		default:
			out[tp] = ListedOffset{Offset: p.Offset, Timestamp: p.Timestamp, LeaderEpoch: p.LeaderEpoch}
		}
	}
	return errors.Join(errs...)
}

// ListGroupOffsets returns the offsets group has committed (Kafka's
// Admin.listConsumerGroupOffsets): for each partition, the next offset its consumers will read.
// A group that has committed nothing has none. It asks the group's coordinator, as
// DescribeGroups does.
func (a *Admin) ListGroupOffsets(ctx context.Context, group string) (map[TopicPartition]int64, error) {
	op := fmt.Sprintf("list offsets of group %.300q", group)
	if group == "" {
		return nil, fmt.Errorf("%s: %w", op, ErrNoGroup)
	}
	var resp wire.OffsetFetchResponse
	if err := a.groupCall(ctx, group, &wire.OffsetFetchRequest{GroupID: group}, &resp, func() wire.ErrorCode { return groupCode(&resp) }); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return committedOffsets(op, &resp)
}

// committedOffsets reads an OffsetFetch answer for op: the committed offset of each partition
// that has one, and an error for the whole request's code or, joined, one per partition's,
// naming it.
func committedOffsets(op string, resp *wire.OffsetFetchResponse) (map[TopicPartition]int64, error) {
	if err := resultErr(op, resp.ErrorCode, nil); err != nil {
		return nil, err
	}
	out := map[TopicPartition]int64{}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			switch {
			case p.ErrorCode != wire.NoError:
				errs = append(errs, resultErr(fmt.Sprintf("%s: %s", op, tp), p.ErrorCode, nil))
			case p.Offset >= 0:
				out[tp] = p.Offset
			}
		}
	}
	return out, errors.Join(errs...)
}

// CommitGroupOffsets sets group's committed offsets (Kafka's Admin.alterConsumerGroupOffsets):
// each the next offset to consume, as Consumer.CommitOffsets takes them. Partitions not named
// keep theirs. The commit is a standalone one (no generation), which the coordinator takes only
// while the group has no members (else UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION): stop the
// group's consumers first, as Kafka asks.
// The partitions whose commit failed are named in the error, which joins one per partition.
func (a *Admin) CommitGroupOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) error {
	op := fmt.Sprintf("commit offsets of group %.300q", group)
	if group == "" {
		return fmt.Errorf("%s: %w", op, ErrNoGroup)
	}
	tps := make([]TopicPartition, 0, len(offsets))
	for tp, off := range offsets {
		if off < 0 {
			return fmt.Errorf("%s: %s at %d: an offset is never negative", op, tp, off)
		}
		tps = append(tps, tp)
	}
	if len(tps) == 0 {
		return nil
	}
	sortTopicPartitions(tps)
	req := &wire.OffsetCommitRequest{GroupID: group, GenerationID: -1}
	for _, tp := range tps {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
			req.Topics = append(req.Topics, wire.OffsetCommitRequestTopic{Topic: tp.Topic})
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, wire.OffsetCommitRequestPartition{Partition: tp.Partition, Offset: offsets[tp], LeaderEpoch: -1})
	}
	var resp wire.OffsetCommitResponse
	if err := a.groupCall(ctx, group, req, &resp, func() wire.ErrorCode { return groupCode(&resp) }); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	answered := map[TopicPartition]wire.ErrorCode{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			answered[TopicPartition{t.Topic, p.Partition}] = p.ErrorCode
		}
	}
	var errs []error
	for _, tp := range tps {
		code, ok := answered[tp]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: %s: no answer from the broker", op, tp))
		case code != wire.NoError:
			errs = append(errs, resultErr(fmt.Sprintf("%s: %s", op, tp), code, nil))
		}
	}
	return errors.Join(errs...)
}

// sortTopicPartitions sorts tps by topic, then partition.
func sortTopicPartitions(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}
