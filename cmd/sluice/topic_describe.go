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
	var underReplicated, unavailable, excludeInternal bool
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
broker; with either, only partition lines are printed (nothing when all is well).`,
		RunE: func(_ *cobra.Command, names []string) error {
			filtered := underReplicated || unavailable
			out := parent.OutOrStdout()
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
				topics := md.Topics
				if len(names) == 0 {
					slices.SortFunc(topics, func(x, y wire.MetadataTopic) int { return strings.Compare(x.Topic, y.Topic) })
				}
				for _, t := range topics {
					if t.ErrorCode != wire.NoError {
						return fmt.Errorf("topic %q: %w", t.Topic, t.ErrorCode)
					}
				}
				for _, t := range topics {
					if excludeInternal && t.IsInternal {
						continue
					}
					if !filtered {
						rf := 0
						if len(t.Partitions) > 0 {
							rf = len(t.Partitions[0].Replicas)
						}
						fmt.Fprintf(out, "Topic: %s\tPartitionCount: %d\tReplicationFactor: %d\tInternal: %v\n", t.Topic, len(t.Partitions), rf, t.IsInternal)
					}
					for _, p := range t.Partitions {
						if !filtered || underReplicated && isUnderReplicated(p) || unavailable && isUnavailable(p, live) {
							writePartitionLine(out, t.Topic, p)
						}
					}
				}
				return nil
			})
			if err != nil || filtered || len(names) == 0 {
				return err
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
	f.BoolVar(&underReplicated, "under-replicated-partitions", false, "only the partitions whose ISR is smaller than their replicas")
	f.BoolVar(&unavailable, "unavailable-partitions", false, "only the partitions with no leader, or whose leader is not a live broker")
	f.BoolVar(&excludeInternal, "exclude-internal", false, "leave out internal topics (__consumer_offsets)")
	return describe
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
