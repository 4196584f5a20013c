package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
)

// groupCmd is kafka-consumer-groups: list, describe, reset and delete consumer groups and their
// committed offsets.
func groupCmd() *cobra.Command {
	cmd, env := adminCommand("group", "List consumer groups, show their committed offsets and lag, and reset them")

	var describeTopic string
	describe := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's state, members, and each partition's committed offset, log end, lag and owner",
		Long: `Show a group as kafka-consumer-groups --describe (with --state and --members) does:
its protocol and state; its members (member id, group.instance.id, client id, host and the
partitions assigned to it); and, for each partition the group has committed an offset in or
assigned to a member (only --topic's with --topic), the committed offset (the next record the
group's consumers read), the log's end offset, the lag between them, and the member that owns
it. '-' stands for what there is none of: no commit, no owner.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			group := args[0]
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				return describeGroup(ctx, cmd, a, group, describeTopic)
			})
		},
	}
	describe.Flags().StringVarP(&describeTopic, "topic", "t", "", "only this topic's partitions")

	var (
		resetTopic      string
		resetPartitions []int
		toEarliest      bool
		toLatest        bool
		toDatetime      string
		toOffset        int64
		shiftBy         int64
		execute         bool
	)
	reset := &cobra.Command{
		Use:   "reset-offsets GROUP --topic T (--to-earliest | --to-latest | --to-datetime TIME | --to-offset N | --shift-by N) [--execute]",
		Short: "Move a group's committed offsets in a topic (a dry run unless --execute)",
		Long: `Move a group's committed offsets in a topic's partitions (all, or --partition's), as
kafka-consumer-groups --reset-offsets does: to the log's start or end, to the first record at
or after a time (the log's end where there is none, with a warning), to an offset, or by a
shift from the committed offset. --shift-by needs a committed offset in every partition it
moves, as in Kafka: it refuses, naming them, partitions where the group has committed
nothing (move those with another option, or leave them out with --partition). An offset
outside the log's range is moved to its nearest end, with a warning. Without --execute it
only prints the new offsets.

Stop the group's consumers first, as Kafka asks: a running consumer of the group would
commit its own position over the reset.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			group := args[0]
			if resetTopic == "" {
				return errors.New("--topic is required")
			}
			byTime, byOffset, byShift := c.Flags().Changed("to-datetime"), c.Flags().Changed("to-offset"), c.Flags().Changed("shift-by")
			n := 0
			for _, set := range []bool{toEarliest, toLatest, byTime, byOffset, byShift} {
				if set {
					n++
				}
			}
			if n != 1 {
				return errors.New("give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by")
			}
			var at client.OffsetSpec
			if byTime {
				var err error
				if at, err = parseDatetime(toDatetime); err != nil {
					return err
				}
			}
			if byOffset && toOffset < 0 {
				return fmt.Errorf("--to-offset %d: offsets are never negative", toOffset)
			}
			warn := func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), "Warn: "+format+"\n", a...) }
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				tps, err := topicPartitions(ctx, a, resetTopic, resetPartitions)
				if err != nil {
					return err
				}
				bounds := func(spec client.OffsetSpec) (map[client.TopicPartition]client.ListedOffset, error) {
					specs := map[client.TopicPartition]client.OffsetSpec{}
					for _, tp := range tps {
						specs[tp] = spec
					}
					return a.ListOffsets(ctx, specs)
				}
				var committed map[client.TopicPartition]int64
				if byShift {
					if committed, err = a.ListGroupOffsets(ctx, group); err != nil {
						return err
					}
					// Kafka refuses too: with nothing committed there is nothing to shift
					// from, and the group's consumers would start by auto.offset.reset.
					var none []string
					for _, tp := range tps {
						if _, ok := committed[tp]; !ok {
							none = append(none, strconv.Itoa(int(tp.Partition)))
						}
					}
					if len(none) > 0 {
						which := "partition " + none[0]
						if len(none) > 1 {
							which = "partitions " + strings.Join(none, ",")
						}
						return fmt.Errorf("--shift-by: group %s has no committed offset to shift in topic %s %s: move those with --to-earliest, --to-latest, --to-datetime or --to-offset, or leave them out with --partition",
							group, resetTopic, which)
					}
				}
				starts, err := bounds(client.OffsetEarliest)
				if err != nil {
					return err
				}
				ends, err := bounds(client.OffsetLatest)
				if err != nil {
					return err
				}
				var times map[client.TopicPartition]client.ListedOffset
				if byTime {
					if times, err = bounds(at); err != nil {
						return err
					}
				}
				next := map[client.TopicPartition]int64{}
				for _, tp := range tps {
					start, end := starts[tp].Offset, ends[tp].Offset
					var off int64
					switch {
					case toEarliest:
						off = start
					case toLatest:
						off = end
					case byTime:
						if off = times[tp].Offset; off < 0 {
							warn("%s has no record at or after %s: the log end %d instead", tp, toDatetime, end)
							off = end
						}
					case byOffset:
						off = toOffset
					default:
						off = satAdd(committed[tp], shiftBy)
					}
					switch {
					case off > end:
						warn("new offset %d of %s is past the log end: %d instead", off, tp, end)
						off = end
					case off < start:
						warn("new offset %d of %s is below the log start: %d instead", off, tp, start)
						off = start
					}
					next[tp] = off
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
				for _, tp := range tps {
					fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", group, tp.Topic, tp.Partition, next[tp])
				}
				if err := w.Flush(); err != nil {
					return err
				}
				if !execute {
					fmt.Fprintln(cmd.ErrOrStderr(), "Dry run: nothing was committed. Add --execute to commit these offsets.")
					return nil
				}
				return a.CommitGroupOffsets(ctx, group, next)
			})
		},
	}
	reset.Flags().StringVarP(&resetTopic, "topic", "t", "", "the topic whose offsets move (required)")
	reset.Flags().IntSliceVar(&resetPartitions, "partition", nil, "only these partitions, `N[,N...]` (repeatable); default all")
	reset.Flags().BoolVar(&toEarliest, "to-earliest", false, "to the log's start")
	reset.Flags().BoolVar(&toLatest, "to-latest", false, "to the log's end (only records produced from then on)")
	reset.Flags().StringVar(&toDatetime, "to-datetime", "", "to the first record at or after this `time` (ms since 1970, or RFC 3339 such as 2026-12-01T10:00:00Z)")
	reset.Flags().Int64Var(&toOffset, "to-offset", 0, "to this offset")
	reset.Flags().Int64Var(&shiftBy, "shift-by", 0, "by this many offsets from the committed offset (negative: back); every partition needs one")
	reset.Flags().BoolVar(&execute, "execute", false, "commit the new offsets (without it, only print them)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the consumer groups, with their protocol type and state",
		Long: `List the consumer groups of the cluster (every broker is asked for those it
coordinates), as kafka-consumer-groups --list --state does: each group's id, its protocol type
("consumer" for a group of consumers, '-' for one that only commits offsets) and its state
(Empty, PreparingRebalance, CompletingRebalance, Stable).`,
		Args: noArgs("to see one group, use describe GROUP"),
		RunE: func(*cobra.Command, []string) error {
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				groups, err := a.ListGroups(ctx) // the brokers that answered, and the error of the others
				if len(groups) > 0 {
					w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
					fmt.Fprintln(w, "GROUP\tPROTOCOL-TYPE\tSTATE")
					for _, g := range groups {
						fmt.Fprintf(w, "%s\t%s\t%s\n", g.ID, orDash(g.ProtocolType), orDash(g.State))
					}
					if ferr := w.Flush(); ferr != nil {
						return ferr
					}
				}
				return err
			})
		},
	}

	cmd.AddCommand(list, describe, reset, groupDeleteCmd(cmd, env), groupDeleteOffsetsCmd(cmd, env))
	return cmd
}

// topicPartitions returns topic's partitions, or those of only (each checked), sorted.
func topicPartitions(ctx context.Context, a *client.Admin, topic string, only []int) ([]client.TopicPartition, error) {
	t, _, err := a.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	want := map[int32]bool{}
	for _, p := range only {
		if p < 0 || p >= len(t.Partitions) || p > math.MaxInt32 {
			return nil, fmt.Errorf("--partition %d: topic %s has partitions 0 to %d", p, t.Name, len(t.Partitions)-1)
		}
		want[int32(p)] = true
	}
	var tps []client.TopicPartition
	for _, p := range t.Partitions {
		if len(want) == 0 || want[p.Partition] {
			tps = append(tps, client.TopicPartition{Topic: t.Name, Partition: p.Partition})
		}
	}
	slices.SortFunc(tps, func(x, y client.TopicPartition) int { return cmp.Compare(x.Partition, y.Partition) })
	return tps, nil
}

// sortedPartitions returns m's keys by topic, then partition.
func sortedPartitions[V any](m map[client.TopicPartition]V) []client.TopicPartition {
	tps := make([]client.TopicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(x, y client.TopicPartition) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return tps
}

// parseDatetime reads reset-offsets' --to-datetime: a time, as topic offsets' --time takes it,
// but not its names of the log's ends (--to-earliest and --to-latest say those).
func parseDatetime(v string) (client.OffsetSpec, error) {
	spec, err := parseOffsetTime(v)
	if err == nil && (spec == client.OffsetEarliest || spec == client.OffsetLatest || spec == client.OffsetMaxTimestamp) {
		err = errors.New("not a time")
	}
	if err != nil {
		return client.OffsetSpec{}, fmt.Errorf("--to-datetime %q: want milliseconds since 1970 or an RFC 3339 time such as 2026-12-01T10:00:00Z", v)
	}
	return spec, nil
}

// satAdd is a+b, saturated at the int64 range.
func satAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
