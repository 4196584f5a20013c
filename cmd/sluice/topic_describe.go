package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// topicDescribeCmd is `topic describe`, as kafka-topics --describe: a line per topic, then
// Kafka's line per partition.
func topicDescribeCmd(parent *cobra.Command, env *adminEnv) *cobra.Command {
	var filters describeFilters
	var excludeInternal, verbose bool
	describe := &cobra.Command{
		Use:   "describe [NAME...]",
		Short: "Show topics' partitions (every topic without a name) and, for named topics, their configuration",
		Long: `Show topics' partitions, as kafka-topics --describe: for each topic (every topic without
a NAME) a line with its partition count and replication factor, then one line per partition:

	Topic: T	Partition: 0	Leader: 1	Replicas: 1,2,0	Isr: 1,2,0	LeaderEpoch: 3

(Corrupt: lists the replicas whose log holds a batch the scrub found bad.) A named topic's
configuration follows its partitions.

--under-replicated-partitions prints only the partitions whose ISR is smaller than their
replicas, --unavailable-partitions only those with no leader or whose leader is not a live
broker, --under-min-isr-partitions those whose ISR is smaller than their topic's
min.insync.replicas (acks=all produce is refused there) and --at-min-isr-partitions those whose
ISR is exactly that size (one more replica lost and it is refused); with any of them, only
partition lines are printed (nothing when all is well), those that match any.

--verbose adds under each partition line its leader's replication state (asked of the leader):

		HighWatermark: 90	LogEndOffset: 100	LogStartOffset: 10	DurableOffset: 95	PartitionEpoch: 4
		Replica: 2	LogEndOffset: 97	Lag: 3	CaughtUpMsAgo: 12	InIsr: true

one Replica line per follower, with its lag behind the leader's log end in offsets and the
milliseconds since it was last caught up ("never": not at this leader epoch; "-": unknown).`,
		RunE: func(_ *cobra.Command, names []string) error {
			filtered := filters.any()
			out := parent.OutOrStdout()
			var minISR map[string]int
			var topics []wire.MetadataTopic
			err := env.withConn(func(ctx context.Context, c *client.Conn) error {
				md := wire.MetadataResponse{Version: 1}
				req := wire.MetadataRequest{Version: 1}
				if len(names) > 0 {
					req.Topics = names
				}
				if err := c.Call(ctx, &req, &md); err != nil {
					return err
				}
				live := map[int32]bool{}
				for _, br := range md.Brokers {
					live[br.NodeID] = true
				}
				topics = md.Topics
				if len(names) == 0 {
					slices.SortFunc(topics, func(x, y wire.MetadataTopic) int { return strings.Compare(x.Topic, y.Topic) })
				}
				for _, t := range topics {
					if t.ErrorCode != wire.NoError {
						return fmt.Errorf("topic %q: %w", t.Topic, t.ErrorCode)
					}
				}
				if filters.underMinISR || filters.atMinISR {
					var err error
					if minISR, err = minInsyncReplicas(ctx, c, topics); err != nil {
						return err
					}
				}
				topics = slices.DeleteFunc(topics, func(t wire.MetadataTopic) bool { return excludeInternal && t.IsInternal })
				for i := range topics {
					t := &topics[i]
					t.Partitions = slices.DeleteFunc(t.Partitions, func(p wire.MetadataPartition) bool {
						return filtered && !filters.keep(p, live, minISR[t.Topic])
					})
				}
				return nil
			})
			if err != nil {
				return err
			}
			var replicas map[client.TopicPartition]wire.DescribeReplicasPartition
			var replicasErr error
			if verbose {
				err = env.withAdmin(func(ctx context.Context, a *client.Admin) error {
					var asked []string
					for _, t := range topics {
						if len(t.Partitions) > 0 {
							asked = append(asked, t.Topic)
						}
					}
					if len(asked) == 0 {
						return nil
					}
					// What the leaders could not answer is said under its partitions, and the
					// error at the end: the rest of the picture is still worth printing.
					got, err := a.DescribeReplicas(ctx, asked...)
					replicas, replicasErr = byPartition(got), err
					return nil
				})
				if err != nil {
					return err
				}
			}
			for _, t := range topics {
				if !filtered {
					rf := 0
					if len(t.Partitions) > 0 {
						rf = len(t.Partitions[0].Replicas)
					}
					fmt.Fprintf(out, "Topic: %s\tPartitionCount: %d\tReplicationFactor: %d\tInternal: %v\n", t.Topic, len(t.Partitions), rf, t.IsInternal)
				}
				for _, p := range t.Partitions {
					writePartitionLine(out, t.Topic, p)
					if verbose {
						writeReplicationLines(out, replicas, client.TopicPartition{Topic: t.Topic, Partition: p.Partition})
					}
				}
			}
			if replicasErr != nil {
				return replicasErr
			}
			if filtered || len(names) == 0 {
				return nil
			}
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				for _, name := range names {
					_, cfgs, err := a.DescribeTopic(ctx, name)
					if err != nil {
						return err
					}
					if err := writeTopicConfigs(out, cfgs); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f := describe.Flags()
	f.BoolVar(&filters.underReplicated, "under-replicated-partitions", false, "only the partitions whose ISR is smaller than their replicas")
	f.BoolVar(&filters.unavailable, "unavailable-partitions", false, "only the partitions with no leader, or whose leader is not a live broker")
	f.BoolVar(&filters.underMinISR, "under-min-isr-partitions", false, "only the partitions whose ISR is smaller than their topic's min.insync.replicas")
	f.BoolVar(&filters.atMinISR, "at-min-isr-partitions", false, "only the partitions whose ISR is exactly their topic's min.insync.replicas")
	f.BoolVar(&excludeInternal, "exclude-internal", false, "leave out internal topics (__consumer_offsets)")
	f.BoolVar(&verbose, "verbose", false, "add each partition's high watermark, log end and start offsets and each follower's lag, from its leader")
	return describe
}

// describeFilters are describe's partition filters (kafka-topics' names); a partition is shown
// if it matches any that is set.
type describeFilters struct {
	underReplicated, unavailable, underMinISR, atMinISR bool
}

func (f describeFilters) any() bool {
	return f.underReplicated || f.unavailable || f.underMinISR || f.atMinISR
}

// keep reports whether p matches a filter that is set; live are the live brokers, minISR the
// topic's min.insync.replicas.
func (f describeFilters) keep(p wire.MetadataPartition, live map[int32]bool, minISR int) bool {
	return f.underReplicated && isUnderReplicated(p) || f.unavailable && isUnavailable(p, live) ||
		f.underMinISR && len(p.ISR) < minISR || f.atMinISR && len(p.ISR) == minISR
}

// isUnderReplicated reports whether p has fewer in-sync replicas than replicas, as
// kafka-topics --under-replicated-partitions.
func isUnderReplicated(p wire.MetadataPartition) bool { return len(p.ISR) < len(p.Replicas) }

// isUnavailable reports whether p has no leader, or one that is not a live broker, as
// kafka-topics --unavailable-partitions.
func isUnavailable(p wire.MetadataPartition, live map[int32]bool) bool {
	return p.Leader < 0 || !live[p.Leader]
}

// writePartitionLine writes Kafka's describe line for one partition, with Sluice's extras.
func writePartitionLine(w io.Writer, topic string, p wire.MetadataPartition) {
	fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s\tLeaderEpoch: %d",
		topic, p.Partition, leaderName(p.Leader), joinIDs(p.Replicas), joinIDs(p.ISR), p.LeaderEpoch)
	if len(p.CorruptReplicas) > 0 {
		// The scrub found a bad batch in these replicas' logs: reads that reach it fail with
		// CORRUPT_MESSAGE.
		fmt.Fprintf(w, "\tCorrupt: %s", joinIDs(p.CorruptReplicas))
	}
	fmt.Fprintln(w)
}

// leaderName is a partition's leader as kafka-topics prints it: "none" without one.
func leaderName(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

// joinIDs writes broker ids as Kafka does: 1,2,0.
func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// writeTopicConfigs writes a topic's effective configuration, one key a line with its source.
func writeTopicConfigs(out io.Writer, cfgs []wire.DescribeConfigsEntry) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "Configs:")
	for _, c := range cfgs {
		v := "null"
		if c.Value != nil {
			v = *c.Value
		}
		fmt.Fprintf(w, "  %s=%s\t(%s)\n", c.Name, v, sourceName(c.Source))
	}
	return w.Flush()
}

// minInsyncReplicas reads the effective min.insync.replicas of topics, in one DescribeConfigs.
func minInsyncReplicas(ctx context.Context, c *client.Conn, topics []wire.MetadataTopic) (map[string]int, error) {
	req := &wire.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, wire.DescribeConfigsResource{ResourceType: wire.ResourceTopic, ResourceName: t.Topic, ConfigNames: []string{minISRKey}})
	}
	var resp wire.DescribeConfigsResponse
	if err := c.Call(ctx, req, &resp); err != nil {
		return nil, err
	}
	out := make(map[string]int, len(resp.Resources))
	for _, r := range resp.Resources {
		if r.ErrorCode != wire.NoError {
			return nil, fmt.Errorf("topic %q: %s: %w", r.ResourceName, minISRKey, r.ErrorCode)
		}
		for _, e := range r.Configs {
			if e.Name != minISRKey || e.Value == nil {
				continue
			}
			n, err := strconv.Atoi(*e.Value)
			if err != nil {
				return nil, fmt.Errorf("topic %q: %s=%q: %w", r.ResourceName, minISRKey, *e.Value, err)
			}
			out[r.ResourceName] = n
		}
	}
	return out, nil
}

// minISRKey is the topic config the min-ISR filters compare the ISR with.
const minISRKey = "min.insync.replicas"

// byPartition indexes DescribeReplicas' answer.
func byPartition(topics []wire.DescribeReplicasTopic) map[client.TopicPartition]wire.DescribeReplicasPartition {
	out := map[client.TopicPartition]wire.DescribeReplicasPartition{}
	for _, t := range topics {
		for _, p := range t.Partitions {
			out[client.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p
		}
	}
	return out
}

// writeReplicationLines writes --verbose's lines for one partition: its offsets at the leader,
// then a line per follower.
func writeReplicationLines(w io.Writer, replicas map[client.TopicPartition]wire.DescribeReplicasPartition, tp client.TopicPartition) {
	p, ok := replicas[tp]
	switch {
	case !ok:
		fmt.Fprintln(w, "\t\tReplication: unknown (its leader did not answer)")
		return
	case p.ErrorCode != wire.NoError:
		fmt.Fprintf(w, "\t\tReplication: unknown (%s)\n", p.ErrorCode.Name())
		return
	}
	fmt.Fprintf(w, "\t\tHighWatermark: %d\tLogEndOffset: %d\tLogStartOffset: %d\tDurableOffset: %d\tPartitionEpoch: %d",
		p.HighWatermark, p.LogEndOffset, p.LogStartOffset, p.DurableOffset, p.PartitionEpoch)
	if p.PendingISR != nil {
		fmt.Fprintf(w, "\tPendingIsr: %s", joinIDs(p.PendingISR))
	}
	fmt.Fprintln(w)
	for _, r := range p.Replicas {
		if r.ReplicaID == p.Leader {
			continue
		}
		fmt.Fprintf(w, "\t\tReplica: %d\tLogEndOffset: %s\tLag: %s\tCaughtUpMsAgo: %s\tInIsr: %v\n",
			r.ReplicaID, orUnknown(r.LogEndOffset), orUnknown(r.Lag), caughtUp(r.SinceCaughtUpMs), r.InISR)
	}
}

// orUnknown prints -1 (unknown) as "-".
func orUnknown(v int64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}

// caughtUp prints the milliseconds since a follower was caught up; "never" at this epoch.
func caughtUp(ms int64) string {
	if ms < 0 {
		return "never"
	}
	return strconv.FormatInt(ms, 10)
}
