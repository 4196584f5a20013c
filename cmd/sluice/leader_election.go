package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/reassign"
)

// leaderElectionCmd is kafka-leader-election: preferred or unclean elections for one
// partition, every partition, or those of a JSON file.
func leaderElectionCmd() *cobra.Command {
	cmd, env := adminCommand("leader-election", "Elect partitions' leaders: their preferred replicas, or (unclean) any live one")
	var typ, topic, file string
	var partition int32
	var all bool
	cmd.Use = "leader-election --election-type preferred|unclean (--topic T --partition P | --all-topic-partitions | --path-to-json-file F)"
	cmd.Long = `Elect partitions' leaders, as kafka-leader-election does.

preferred: each partition's first replica (its preferred leader) becomes its leader, if it is
in the ISR and live. auto.leader.rebalance.enable does this by itself for brokers whose share
of their preferred leaderships falls short by more than leader.imbalance.per.broker.percentage.

unclean: a partition with no leader gets one from any live replica, in the ISR or not; its ISR
is then that replica alone, and records only the old ISR had are lost. For a partition whose
whole ISR is gone and will not come back.

The partitions: --topic and --partition for one, --all-topic-partitions for every one, or
--path-to-json-file with Kafka's {"partitions":[{"topic":"foo","partition":1}]}.`
	cmd.Args = noArgs("the partitions are given by flags")
	cmd.RunE = func(_ *cobra.Command, _ []string) error {
		var et client.ElectionType
		switch strings.ToLower(typ) {
		case "preferred":
			et = client.ElectPreferred
		case "unclean":
			et = client.ElectUnclean
		default:
			return fmt.Errorf("--election-type %q: want preferred or unclean", typ)
		}
		given := 0
		for _, set := range []bool{topic != "" || cmd.Flags().Changed("partition"), all, file != ""} {
			if set {
				given++
			}
		}
		if given != 1 {
			return errors.New("give one of --topic T --partition P, --all-topic-partitions, --path-to-json-file F")
		}
		var tps []client.TopicPartition
		switch {
		case all:
		case file != "":
			b, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			ep, err := reassign.ParseElectionPlan(b)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			tps = []client.TopicPartition{}
			for _, p := range ep.Partitions {
				tps = append(tps, client.TopicPartition{Topic: p.Topic, Partition: p.Partition})
			}
		default:
			if topic == "" || !cmd.Flags().Changed("partition") {
				return errors.New("--topic and --partition go together")
			}
			tps = []client.TopicPartition{{Topic: topic, Partition: partition}}
		}
		out := cmd.OutOrStdout()
		return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
			results, err := a.ElectLeaders(ctx, et, tps)
			if err != nil {
				return err
			}
			var elected, notNeeded, failed []string
			var reasons []string
			for tp, err := range results {
				name := fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
				switch {
				case err == nil:
					elected = append(elected, name)
				case errors.Is(err, wire.ErrElectionNotNeeded):
					notNeeded = append(notNeeded, name)
				default:
					failed = append(failed, name)
					reasons = append(reasons, fmt.Sprintf("%s: %v", name, err))
				}
			}
			kind := strings.ToUpper(typ)
			sort.Strings(elected)
			sort.Strings(notNeeded)
			sort.Strings(reasons)
			if len(elected) > 0 {
				fmt.Fprintf(out, "Successfully completed leader election (%s) for partitions %s\n", kind, strings.Join(elected, ", "))
			}
			if len(notNeeded) > 0 {
				fmt.Fprintf(out, "Valid replica already elected for partitions %s\n", strings.Join(notNeeded, ", "))
			}
			if len(elected) == 0 && len(notNeeded) == 0 && len(failed) == 0 {
				fmt.Fprintln(out, "No partition needed an election.")
			}
			if len(failed) > 0 {
				fmt.Fprintf(out, "Error completing leader election (%s) for partitions:\n", kind)
				for _, r := range reasons {
					fmt.Fprintln(out, "  "+r)
				}
				if len(failed) == 1 {
					return fmt.Errorf("leader election failed for %s", failed[0])
				}
				sort.Strings(failed)
				return fmt.Errorf("leader election failed for %d partitions: %s", len(failed), strings.Join(failed, ", "))
			}
			return nil
		})
	}
	f := cmd.Flags()
	f.StringVar(&typ, "election-type", "", "preferred or unclean")
	f.StringVar(&topic, "topic", "", "the topic of the one partition")
	f.Int32Var(&partition, "partition", 0, "the one partition")
	f.BoolVar(&all, "all-topic-partitions", false, "every partition")
	f.StringVar(&file, "path-to-json-file", "", "the partitions, Kafka's JSON: {\"partitions\":[{\"topic\":\"foo\",\"partition\":1}]}")
	return cmd
}
