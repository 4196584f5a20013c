package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/net/wire"
)

// ErrNoDescribeReplicas: the broker does not implement DescribeReplicas (one older than it).
var ErrNoDescribeReplicas = errors.New("client: the broker does not implement DescribeReplicas")

// DescribeReplicas returns the replication state of the named topics' partitions (every
// topic's without a name) as each partition's leader describes it: its high watermark, log
// start, log end and durable end offsets, its committed and pending ISR, and each replica's
// progress with its lag (see wire.DescribeReplicasPartition). Topics and partitions come
// sorted. The Admin finds the leaders in the metadata of its broker and asks each once, on a
// connection of its own (its own broker's when that one leads); a partition without a leader is
// answered LEADER_NOT_AVAILABLE, and one whose leadership moved between the two requests the
// NOT_LEADER_OR_FOLLOWER its old leader gave. A missing topic is an error wrapping
// ErrUnknownTopic. A leader that cannot be reached leaves its partitions out, and the error
// names it; the rest is returned.
func (a *Admin) DescribeReplicas(ctx context.Context, topics ...string) ([]wire.DescribeReplicasTopic, error) {
	ctx, cancel := apiContext(ctx, a.cfg.DefaultAPITimeout)
	defer cancel()
	md := wire.MetadataResponse{}
	req := wire.MetadataRequest{}
	if len(topics) > 0 {
		req.Topics = topics
	}
	if err := a.call(ctx, &req, &md); err != nil {
		return nil, fmt.Errorf("describe replicas: %w", err)
	}
	var errs []error
	out := make([]wire.DescribeReplicasTopic, 0, len(md.Topics))
	// byLeader: the topics each leader is asked for; want: which leader each partition's answer
	// must come from.
	byLeader := map[int32][]string{}
	want := map[TopicPartition]int32{}
	for _, t := range md.Topics {
		if err := resultErr(topicOp("describe replicas of topic", t.Topic), t.ErrorCode, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				continue
			}
			want[TopicPartition{t.Topic, p.Partition}] = p.Leader
			if l := byLeader[p.Leader]; len(l) == 0 || l[len(l)-1] != t.Topic {
				byLeader[p.Leader] = append(l, t.Topic)
			}
		}
	}
	answers := map[TopicPartition]wire.DescribeReplicasPartition{}
	leaders := make([]int32, 0, len(byLeader))
	for id := range byLeader {
		leaders = append(leaders, id)
	}
	slices.Sort(leaders)
	for _, id := range leaders {
		resp, err := a.describeReplicasAt(ctx, md.Brokers, id, byLeader[id])
		if err != nil {
			errs = append(errs, fmt.Errorf("describe replicas at broker %d: %w", id, err))
			continue
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				tp := TopicPartition{t.Topic, p.Partition}
				if leader, ok := want[tp]; ok && leader == id {
					answers[tp] = p
				}
			}
		}
	}
	for _, t := range md.Topics {
		if t.ErrorCode != wire.NoError {
			continue
		}
		rt := wire.DescribeReplicasTopic{Topic: t.Topic, Partitions: make([]wire.DescribeReplicasPartition, 0, len(t.Partitions))}
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			switch ans, ok := answers[tp]; {
			case ok:
				rt.Partitions = append(rt.Partitions, ans)
			case p.Leader < 0:
				rt.Partitions = append(rt.Partitions, wire.DescribeReplicasPartition{Partition: p.Partition, ErrorCode: wire.ErrLeaderNotAvailable,
					Leader: -1, LeaderEpoch: -1, PartitionEpoch: -1, HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1, DurableOffset: -1})
			}
		}
		slices.SortFunc(rt.Partitions, func(x, y wire.DescribeReplicasPartition) int { return int(x.Partition) - int(y.Partition) })
		out = append(out, rt)
	}
	slices.SortFunc(out, func(x, y wire.DescribeReplicasTopic) int { return strings.Compare(x.Topic, y.Topic) })
	return out, errors.Join(errs...)
}

// describeReplicasAt asks broker id, found in brokers, about topics: on the Admin's own
// connection if that is the broker's address, else on one dialled for the call.
func (a *Admin) describeReplicasAt(ctx context.Context, brokers []wire.MetadataBroker, id int32, topics []string) (*wire.DescribeReplicasResponse, error) {
	conn, release, err := a.brokerConn(ctx, brokers, id)
	if err != nil {
		return nil, err
	}
	defer release()
	if !conn.supports(wire.DescribeReplicas) {
		return nil, ErrNoDescribeReplicas
	}
	v := min(conn.Version(wire.DescribeReplicas), 1)
	resp := &wire.DescribeReplicasResponse{Version: v}
	if err := conn.callWithin(ctx, a.cfg.RequestTimeout, &wire.DescribeReplicasRequest{Version: v, Topics: topics}, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// sameBroker reports whether the Admin's connection, dialled at connAddr, reaches broker b
// (whose address is addr): the same address, or b's unix socket.
func sameBroker(connAddr, addr string, b wire.MetadataBroker) bool {
	if connAddr == addr {
		return true
	}
	return b.UnixPath != "" && (connAddr == "unix://"+b.UnixPath || connAddr == "unix:"+b.UnixPath)
}
