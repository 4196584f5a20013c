package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
)

func topicCmd() *cobra.Command {
	cmd, env := adminCommand("topic", "Create, list, describe, alter and delete topics, and show their offsets")

	create := topicCreateCmd(cmd, env)
	list := topicListCmd(cmd, env)
	describe := topicDescribeCmd(cmd, env)

	deleteCmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a topic and its data",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				if err := a.DeleteTopic(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Deleted topic %s.\n", args[0])
				return nil
			})
		},
	}

	var alterConfigs, deleteConfigs []string
	var alterPartitions int32
	alter := &cobra.Command{
		Use:   "alter NAME",
		Short: "Add partitions, or set or remove topic config overrides",
		Long: "Add partitions (--partitions N, the new total: partitions are never removed; they are placed as at\n" +
			"creation, and records with a key may go to another partition afterwards), or set or remove topic\n" +
			"config overrides.\n\n" + topicConfigsHelp(),
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			set, err := parseConfigs(alterConfigs)
			if err != nil {
				return err
			}
			growing := c.Flags().Changed("partitions")
			if len(set) == 0 && len(deleteConfigs) == 0 && !growing {
				return fmt.Errorf("nothing to alter: give --partitions N, --config key=value or --delete-config key")
			}
			if growing {
				if alterPartitions < 1 {
					return fmt.Errorf("--partitions %d: the new total must be at least 1", alterPartitions)
				}
				if len(set) > 0 || len(deleteConfigs) > 0 {
					return fmt.Errorf("--partitions and --config/--delete-config: give one (two commands)")
				}
				return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
					if err := a.CreatePartitions(ctx, args[0], alterPartitions, nil); err != nil {
						return err // names the topic
					}
					fmt.Fprintf(cmd.OutOrStdout(), "Topic %s now has %d partitions.\n", args[0], alterPartitions)
					return nil
				})
			}
			for _, k := range deleteConfigs {
				if _, ok := set[k]; ok {
					return fmt.Errorf("%s is both set (--config) and removed (--delete-config): give one", k)
				}
			}
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				if err := checkDeleteConfigs(ctx, a, args[0], deleteConfigs); err != nil {
					return err
				}
				if err := a.AlterTopicConfigs(ctx, args[0], set, deleteConfigs); err != nil {
					return err // names the topic
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Altered topic %s.\n", args[0])
				return nil
			})
		},
	}
	alter.Flags().Int32Var(&alterPartitions, "partitions", 0, "the topic's new partition count (more than it has)")
	alter.Flags().StringArrayVar(&alterConfigs, "config", nil, "config override key=value (repeatable)")
	alter.Flags().StringArrayVar(&deleteConfigs, "delete-config", nil, "config override to remove (repeatable): one the topic has, shown as (topic) by describe")

	var offsetsTime string
	var offsetsPartitions []int
	offsets := &cobra.Command{
		Use:   "offsets NAME",
		Short: "Show each partition's end offset, start offset, or offset at a time",
		Long: `Show one offset per partition of a topic (as kafka-get-offsets does), one line each:
TOPIC:PARTITION:OFFSET. --time says which: latest (the default: the log's end, the offset the
next record will get), earliest (the log's start), max-timestamp (the record with the largest
timestamp), or a time (milliseconds since 1970, or RFC 3339 such as 2026-12-01T10:00:00Z):
the first offset whose record is at or after it; a partition with no such record prints no
offset (TOPIC:PARTITION:). Kafka's -1, -2 and -3 are taken for latest, earliest and
max-timestamp.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			spec, err := parseOffsetTime(offsetsTime)
			if err != nil {
				return err
			}
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				order, err := topicPartitions(ctx, a, args[0], offsetsPartitions)
				if err != nil {
					return err
				}
				specs := map[client.TopicPartition]client.OffsetSpec{}
				for _, tp := range order {
					specs[tp] = spec
				}
				got, err := a.ListOffsets(ctx, specs)
				for _, tp := range order {
					o, ok := got[tp]
					switch {
					case !ok: // in err
					case o.Offset < 0:
						fmt.Fprintf(cmd.OutOrStdout(), "%s:%d:\n", tp.Topic, tp.Partition)
					default:
						fmt.Fprintf(cmd.OutOrStdout(), "%s:%d:%d\n", tp.Topic, tp.Partition, o.Offset)
					}
				}
				return err
			})
		},
	}
	offsets.Flags().StringVar(&offsetsTime, "time", "latest", "which offset: latest, earliest, max-timestamp, or a time (ms since 1970, or RFC 3339)")
	offsets.Flags().IntSliceVar(&offsetsPartitions, "partition", nil, "only these partitions, `N[,N...]` (repeatable); default all")

	cmd.AddCommand(create, list, describe, deleteCmd, alter, offsets)
	return cmd
}

// checkDeleteConfigs refuses to remove what is not one of the topic's overrides, as
// kafka-configs.sh does: removing nothing would report success, and a typo (retention.m) or a
// config left at its default would look removed.
func checkDeleteConfigs(ctx context.Context, a *client.Admin, topic string, del []string) error {
	if len(del) == 0 {
		return nil
	}
	_, cfgs, err := a.DescribeTopic(ctx, topic)
	if err != nil {
		return err
	}
	known := map[string]wire.ConfigSource{}
	var overrides []string
	for _, c := range cfgs {
		known[c.Name] = c.Source
		if c.Source == wire.ConfigSourceDynamicTopic {
			overrides = append(overrides, c.Name)
		}
	}
	set := "none"
	if len(overrides) > 0 {
		set = strings.Join(overrides, ", ")
	}
	for _, k := range del {
		src, ok := known[k]
		switch {
		case !ok:
			return fmt.Errorf("--delete-config %s: no such topic config (topic %s's overrides: %s)", k, topic, set)
		case src != wire.ConfigSourceDynamicTopic:
			return fmt.Errorf("--delete-config %s: topic %s does not override it (it has the %s value; overrides: %s)", k, topic, sourceName(src), set)
		}
	}
	return nil
}

// parseOffsetTime reads topic offsets' --time.
func parseOffsetTime(v string) (client.OffsetSpec, error) {
	switch strings.ToLower(v) {
	case "latest", "-1":
		return client.OffsetLatest, nil
	case "earliest", "-2":
		return client.OffsetEarliest, nil
	case "max-timestamp", "-3":
		return client.OffsetMaxTimestamp, nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < 0 {
			return client.OffsetSpec{}, fmt.Errorf("--time %s: a time is milliseconds since 1970, not negative (or -1, -2, -3 for latest, earliest, max-timestamp)", v)
		}
		return client.OffsetAt(time.UnixMilli(ms)), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return client.OffsetAt(t), nil
	}
	return client.OffsetSpec{}, fmt.Errorf("--time %q: want latest, earliest, max-timestamp, milliseconds since 1970, or an RFC 3339 time (2026-12-01T10:00:00Z)", v)
}

func parseConfigs(kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("config %q is not key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

func sourceName(s wire.ConfigSource) string {
	switch s {
	case wire.ConfigSourceDynamicTopic:
		return "topic"
	case wire.ConfigSourceDynamicBroker, wire.ConfigSourceDynamicDefaultBroker, wire.ConfigSourceStaticBroker:
		return "broker"
	case wire.ConfigSourceDefault:
		return "default"
	}
	return "unknown"
}

// topicConfigsHelp lists the configs a topic's --config may set, from the broker's own registry
// (cluster.TopicConfigDefs), so that the list cannot miss a key the broker knows.
func topicConfigsHelp() string {
	var b strings.Builder
	b.WriteString("Topic configs (Kafka's names and defaults; a broker's log.* properties change some defaults,\n" +
		"and `topic describe` shows a topic's values):\n")
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, d := range cluster.TopicConfigDefs() {
		def := d.Default
		if def == "9223372036854775807" { // Long.MAX_VALUE, Kafka's "never"
			def = "never"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\n", d.Name, def, d.Doc)
	}
	_ = w.Flush()
	return b.String()
}
