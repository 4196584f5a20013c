package client

import (
	"context"
	"fmt"
	"sort"

	"github.com/sluicemq/sluice/net/wire"
)

// Admin manages topics through one broker connection.
type Admin struct {
	conn *Conn
}

// NewAdmin dials addr for administration.
func NewAdmin(ctx context.Context, addr string) (*Admin, error) {
	c, err := Dial(ctx, addr, "sluice-admin")
	if err != nil {
		return nil, err
	}
	return &Admin{conn: c}, nil
}

// Close closes the connection.
func (a *Admin) Close() error { return a.conn.Close() }

// TopicSpec describes a topic to create. Partitions and ReplicationFactor <= 0 take the
// broker's defaults.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Assignment        [][]int32 // optional replicas per partition
	Configs           map[string]string
}

func resultErr(code wire.ErrorCode, msg *string) error {
	if code == wire.NoError {
		return nil
	}
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", code, *msg)
	}
	return code
}

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
// wire.ErrTopicAlreadyExists, wire.ErrInvalidTopicException, ...).
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
	var resp wire.CreateTopicsResponse
	if err := a.conn.Call(ctx, &wire.CreateTopicsRequest{Topics: []wire.CreateTopicsRequestTopic{t}, TimeoutMs: 30000}, &resp); err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("client: create topic: %d results for 1 topic", len(resp.Topics))
	}
	return resultErr(resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
}

// DeleteTopic deletes a topic and its data.
func (a *Admin) DeleteTopic(ctx context.Context, name string) error {
	var resp wire.DeleteTopicsResponse
	if err := a.conn.Call(ctx, &wire.DeleteTopicsRequest{Topics: []string{name}, TimeoutMs: 30000}, &resp); err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("client: delete topic: %d results for 1 topic", len(resp.Topics))
	}
	return resultErr(resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
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
	if err := a.conn.Call(ctx, &wire.MetadataRequest{}, &resp); err != nil {
		return nil, err
	}
	out := make([]TopicInfo, 0, len(resp.Topics))
	for _, t := range resp.Topics {
		out = append(out, TopicInfo{Name: t.Topic, Internal: t.IsInternal, Partitions: t.Partitions})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DescribeTopic returns a topic's partitions and its effective configuration.
func (a *Admin) DescribeTopic(ctx context.Context, name string) (TopicInfo, []wire.DescribeConfigsEntry, error) {
	var md wire.MetadataResponse
	if err := a.conn.Call(ctx, &wire.MetadataRequest{Topics: []string{name}}, &md); err != nil {
		return TopicInfo{}, nil, err
	}
	if len(md.Topics) != 1 {
		return TopicInfo{}, nil, fmt.Errorf("client: describe: %d topics in the answer", len(md.Topics))
	}
	t := md.Topics[0]
	if err := resultErr(t.ErrorCode, nil); err != nil {
		return TopicInfo{}, nil, fmt.Errorf("topic %s: %w", name, err)
	}
	var dc wire.DescribeConfigsResponse
	if err := a.conn.Call(ctx, &wire.DescribeConfigsRequest{Resources: []wire.DescribeConfigsResource{{ResourceType: wire.ResourceTopic, ResourceName: name}}}, &dc); err != nil {
		return TopicInfo{}, nil, err
	}
	if len(dc.Resources) != 1 {
		return TopicInfo{}, nil, fmt.Errorf("client: describe configs: %d results", len(dc.Resources))
	}
	r := dc.Resources[0]
	if err := resultErr(r.ErrorCode, r.ErrorMessage); err != nil {
		return TopicInfo{}, nil, err
	}
	return TopicInfo{Name: t.Topic, Internal: t.IsInternal, Partitions: t.Partitions}, r.Configs, nil
}

// AlterTopicConfigs sets (and, with a nil value in del, removes) topic config overrides, keeping
// the overrides it does not name: it reads the current overrides and sends the merged set,
// because AlterConfigs replaces a topic's overrides wholesale.
func (a *Admin) AlterTopicConfigs(ctx context.Context, name string, set map[string]string, del []string) error {
	var dc wire.DescribeConfigsResponse
	if err := a.conn.Call(ctx, &wire.DescribeConfigsRequest{Resources: []wire.DescribeConfigsResource{{ResourceType: wire.ResourceTopic, ResourceName: name}}}, &dc); err != nil {
		return err
	}
	if len(dc.Resources) != 1 {
		return fmt.Errorf("client: describe configs: %d results", len(dc.Resources))
	}
	if err := resultErr(dc.Resources[0].ErrorCode, dc.Resources[0].ErrorMessage); err != nil {
		return err
	}
	merged := map[string]string{}
	for _, e := range dc.Resources[0].Configs {
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
	if err := a.conn.Call(ctx, req, &resp); err != nil {
		return err
	}
	if len(resp.Resources) != 1 {
		return fmt.Errorf("client: alter configs: %d results", len(resp.Resources))
	}
	return resultErr(resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage)
}
