package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// describeGroup prints group (only topic's partitions if topic is not ""): a line of its state,
// its members, and its partitions, each table after a blank line.
func describeGroup(ctx context.Context, cmd *cobra.Command, a *client.Admin, group, topic string) error {
	descs, err := a.DescribeGroups(ctx, group)
	if len(descs) != 1 {
		return err
	}
	d := descs[0]
	describeErr := err // a member's assignment that did not decode: the rest is shown
	committed, err := a.ListGroupOffsets(ctx, group)
	if err != nil {
		return err
	}
	if d.State == "Dead" && len(committed) == 0 {
		return fmt.Errorf("consumer group %s does not exist", group)
	}
	owner := map[client.TopicPartition]*client.GroupMember{}
	for i := range d.Members {
		for _, tp := range d.Members[i].Assignment {
			owner[tp] = &d.Members[i]
		}
	}
	rows := map[client.TopicPartition]bool{}
	specs := map[client.TopicPartition]client.OffsetSpec{}
	for tp := range committed {
		rows[tp] = true
	}
	for tp := range owner {
		rows[tp] = true
	}
	for tp := range rows {
		if topic != "" && tp.Topic != topic {
			delete(rows, tp)
			continue
		}
		specs[tp] = client.OffsetLatest
	}

	out := cmd.OutOrStdout()
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tPROTOCOL-TYPE\tPROTOCOL\tSTATE\t#MEMBERS")
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", d.ID, orDash(d.ProtocolType), orDash(d.Protocol), d.State, len(d.Members))
	if err := w.Flush(); err != nil {
		return err
	}
	if len(d.Members) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(w, "MEMBER-ID\tINSTANCE-ID\tCLIENT-ID\tHOST\tASSIGNMENT")
		for _, m := range d.Members {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.ID, orDash(m.InstanceID), orDash(m.ClientID), orDash(m.Host), assignmentString(m.Assignment))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(rows) == 0 {
		what := "any partition"
		if topic != "" {
			what = "topic " + topic
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Group %s has no committed offset and no assigned partition in %s.\n", group, what)
		return describeErr
	}
	ends, endsErr := a.ListOffsets(ctx, specs) // a partition without an end shows "-"
	fmt.Fprintln(out)
	fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
	for _, tp := range sortedPartitions(rows) {
		current, end, lag := "-", "-", "-"
		off, hasCommit := committed[tp]
		if hasCommit {
			current = strconv.FormatInt(off, 10)
		}
		if e, ok := ends[tp]; ok {
			end = strconv.FormatInt(e.Offset, 10)
			if hasCommit {
				lag = strconv.FormatInt(max(e.Offset-off, 0), 10)
			}
		}
		member, host, clientID := "-", "-", "-"
		if m := owner[tp]; m != nil {
			member, host, clientID = m.ID, orDash(m.Host), orDash(m.ClientID)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", group, tp.Topic, tp.Partition, current, end, lag, member, host, clientID)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return errors.Join(describeErr, endsErr)
}

// assignmentString is a member's partitions as topic(0,1),other(2), or "-" for none; tps is
// sorted.
func assignmentString(tps []client.TopicPartition) string {
	if len(tps) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, tp := range tps {
		switch {
		case i == 0:
			b.WriteString(tp.Topic + "(")
		case tps[i-1].Topic != tp.Topic:
			b.WriteString("),")
			b.WriteString(tp.Topic + "(")
		default:
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(tp.Partition)))
	}
	b.WriteByte(')')
	return b.String()
}

// orDash is s, or "-" for an empty s.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// groupDeleteOffsetsCmd is `group delete-offsets`, as kafka-consumer-groups --delete-offsets.
func groupDeleteOffsetsCmd(parent *cobra.Command, env *adminEnv) *cobra.Command {
	var (
		topic      string
		partitions []int
	)
	cmd := &cobra.Command{
		Use:   "delete-offsets GROUP --topic T [--partition N[,N...]]",
		Short: "Delete a group's committed offsets in a topic",
		Long: `Delete a group's committed offsets in a topic's partitions (all, or --partition's), as
kafka-consumer-groups --delete-offsets does: the group's consumers then start those partitions
where auto.offset.reset (consume --from-beginning) says. The coordinator refuses a topic the
group's members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC): stop them, or let them unsubscribe,
first. Each partition's result is printed; any that failed make the command fail.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			group := args[0]
			if topic == "" {
				return errors.New("--topic is required")
			}
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				tps, err := topicPartitions(ctx, a, topic, partitions)
				if err != nil {
					return err
				}
				results, err := a.DeleteGroupOffsets(ctx, group, tps)
				if err != nil {
					return err
				}
				return printDeleteOffsets(parent.OutOrStdout(), group, topic, tps, results)
			})
		},
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "the topic whose committed offsets are deleted (required)")
	cmd.Flags().IntSliceVar(&partitions, "partition", nil, "only these partitions, `N[,N...]` (repeatable); default all")
	return cmd
}

// printDeleteOffsets prints each partition's result of a delete-offsets, and returns an error
// joining the failed ones.
func printDeleteOffsets(out io.Writer, group, topic string, tps []client.TopicPartition, results map[client.TopicPartition]error) error {
	var errs []error
	for _, tp := range tps {
		if err := results[tp]; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		fmt.Fprintf(out, "Request succeeded for deleting offsets of topic %s from group %s.\n\n", topic, group)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tSTATUS")
	for _, tp := range tps {
		status := "Successful"
		if err := results[tp]; err != nil {
			status = "Error: " + err.Error()
			var code wire.ErrorCode
			if errors.As(err, &code) {
				status = "Error: " + code.Name()
			}
		}
		fmt.Fprintf(w, "%s\t%d\t%s\n", tp.Topic, tp.Partition, status)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return errors.Join(errs...)
}
