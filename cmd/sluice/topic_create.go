package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// topicCreateCmd is `topic create`, as kafka-topics --create.
func topicCreateCmd(parent *cobra.Command, env *adminEnv) *cobra.Command {
	var (
		partitions  int32
		replication int16
		configs     []string
		assignment  string
		ifNotExists bool
	)
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Long: `Create a topic.

--replica-assignment places the replicas by hand, in Kafka's format: partitions separated by
commas, each partition's broker ids by colons, the preferred leader first. 0:1,1:0,0:1,1:0 is
four partitions of two replicas on brokers 0 and 1, led by 0, 1, 0 and 1. The partition count
and the replication factor then come from it, so it goes without --partitions and
--replication-factor.

` + topicConfigsHelp(),
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			// 0 (the flag's default) means the broker's default; given explicitly, 0 or a
			// negative count is a mistake, not a request for the default.
			if c.Flags().Changed("partitions") && partitions < 1 {
				return fmt.Errorf("--partitions %d: a topic needs at least 1 (leave the flag out for the broker's num.partitions)", partitions)
			}
			if c.Flags().Changed("replication-factor") && replication < 1 {
				return fmt.Errorf("--replication-factor %d: at least 1 (leave the flag out for the broker's default.replication.factor)", replication)
			}
			spec := client.TopicSpec{Name: args[0], Partitions: partitions, ReplicationFactor: replication}
			if c.Flags().Changed("replica-assignment") {
				for _, f := range []string{"partitions", "replication-factor"} {
					if c.Flags().Changed(f) {
						return fmt.Errorf("--replica-assignment and --%s cannot be used together: the assignment says both the partitions and their replicas", f)
					}
				}
				a, err := parseReplicaAssignment(assignment)
				if err != nil {
					return err
				}
				spec.Assignment = a
				spec.Partitions, spec.ReplicationFactor = 0, 0
			}
			cfg, err := parseConfigs(configs)
			if err != nil {
				return err
			}
			spec.Configs = cfg
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				err := a.CreateTopic(ctx, spec)
				if ifNotExists && errors.Is(err, wire.ErrTopicAlreadyExists) {
					return nil // as kafka-topics --if-not-exists: nothing to say
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(parent.OutOrStdout(), "Created topic %s.\n", args[0])
				return nil
			})
		},
	}
	f := create.Flags()
	f.Int32Var(&partitions, "partitions", 0, "number of partitions (default: the broker's num.partitions)")
	f.Int16Var(&replication, "replication-factor", 0, "replicas per partition (default: the broker's default.replication.factor)")
	f.StringVar(&assignment, "replica-assignment", "", "replicas of each partition, `B:B,B:B,...` (Kafka's format: partitions by commas, broker ids by colons, preferred leader first)")
	f.BoolVar(&ifNotExists, "if-not-exists", false, "succeed, creating nothing, if the topic exists")
	f.StringArrayVar(&configs, "config", nil, "topic config override key=value (repeatable)")
	return create
}

// parseReplicaAssignment reads Kafka's --replica-assignment: "0:1,1:0" is partition 0 on
// brokers 0 and 1, partition 1 on 1 and 0. Every partition has the same number of replicas,
// none twice, as Kafka requires; whether the brokers exist is the controller's to say.
func parseReplicaAssignment(v string) ([][]int32, error) {
	if strings.TrimSpace(v) == "" {
		return nil, fmt.Errorf("--replica-assignment %q: empty (want broker ids such as 0:1,1:0)", v)
	}
	var out [][]int32
	for p, part := range strings.Split(v, ",") {
		var replicas []int32
		for _, id := range strings.Split(strings.TrimSpace(part), ":") {
			n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 32)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("--replica-assignment %q: partition %d: %q is not a broker id", v, p, id)
			}
			if slices.Contains(replicas, int32(n)) {
				return nil, fmt.Errorf("--replica-assignment %q: partition %d names broker %d twice", v, p, n)
			}
			replicas = append(replicas, int32(n))
		}
		if len(out) > 0 && len(replicas) != len(out[0]) {
			return nil, fmt.Errorf("--replica-assignment %q: partition %d has %d replicas, partition 0 has %d: every partition needs the same number", v, p, len(replicas), len(out[0]))
		}
		out = append(out, replicas)
	}
	return out, nil
}

// topicListCmd is `topic list`, as kafka-topics --list.
func topicListCmd(parent *cobra.Command, env *adminEnv) *cobra.Command {
	var excludeInternal bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Args:  noArgs("to see one topic, use describe NAME"),
		RunE: func(*cobra.Command, []string) error {
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				topics, err := a.ListTopics(ctx)
				if err != nil {
					return err
				}
				for _, t := range topics {
					if excludeInternal && t.Internal {
						continue
					}
					fmt.Fprintln(parent.OutOrStdout(), t.Name)
				}
				return nil
			})
		},
	}
	list.Flags().BoolVar(&excludeInternal, "exclude-internal", false, "leave out internal topics (__consumer_offsets)")
	return list
}
