package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/reassign"
)

// reassignGenerateCmd is `reassign generate`, as kafka-reassign-partitions --generate.
func reassignGenerateCmd(parent *cobra.Command, env *adminEnv) *cobra.Command {
	var topicsFile, brokerList string
	var seed int64
	cmd := &cobra.Command{
		Use:   "generate --topics-to-move-json-file F --broker-list ID[,ID...] [--seed N]",
		Short: "Propose a balanced reassignment of some topics over some brokers",
		Long: `Propose where the partitions of the topics in --topics-to-move-json-file should live on the
brokers of --broker-list, as kafka-reassign-partitions --generate does, and print the topics'
current assignment (keep it: it is the plan that rolls the move back) and the proposed one
(the plan for execute), each as Kafka's JSON:

	{"version":1,"topics":[{"topic":"foo"}]}                          (the file read)
	{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}

Unlike Kafka's, the proposal moves as few replicas as it can: each partition keeps its
replication factor, the replicas and the preferred leaders (first replicas) are spread evenly
over the listed brokers (per broker the counts differ by at most one, per topic and over all),
and a replica already on a listed broker stays unless that balance needs it elsewhere. The
same input and --seed give the same plan; another seed may pick another plan among equally
good ones. Nothing is moved: execute does that.`,
		Args: noArgs("the topics are in --topics-to-move-json-file"),
		RunE: func(_ *cobra.Command, _ []string) error {
			if topicsFile == "" || brokerList == "" {
				return errors.New("--topics-to-move-json-file and --broker-list are required")
			}
			brokers, err := parseBrokerList(brokerList)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(topicsFile)
			if err != nil {
				return err
			}
			ttm, err := reassign.ParseTopicsToMove(b)
			if err != nil {
				return fmt.Errorf("%s: %w", topicsFile, err)
			}
			if len(ttm.Topics) == 0 {
				return fmt.Errorf("%s: no topics to move", topicsFile)
			}
			var current reassign.Plan
			err = env.withConn(func(ctx context.Context, c *client.Conn) error {
				current, err = currentAssignment(ctx, c, ttm, brokers)
				return err
			})
			if err != nil {
				return err
			}
			proposed, err := reassign.Generate(current, brokers, seed)
			if err != nil {
				return err
			}
			writeGenerated(parent.OutOrStdout(), current, proposed)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topicsFile, "topics-to-move-json-file", "", "the topics to move, Kafka's JSON: {\"version\":1,\"topics\":[{\"topic\":\"foo\"}]}")
	f.StringVar(&brokerList, "broker-list", "", "the brokers to place the topics on, `ID[,ID...]` (\"0,1,2\")")
	f.Int64Var(&seed, "seed", 0, "chooses among equally good plans; the same seed, the same plan")
	return cmd
}

// parseBrokerList reads --broker-list: broker ids separated by commas, each once.
func parseBrokerList(list string) ([]int32, error) {
	var out []int32
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		id, err := strconv.ParseInt(s, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--broker-list %q: %q is not a broker id (want ID[,ID...], such as 0,1,2)", list, s)
		}
		if slices.Contains(out, int32(id)) {
			return nil, fmt.Errorf("--broker-list %q: broker %d is listed twice", list, id)
		}
		out = append(out, int32(id))
	}
	return out, nil
}

// currentAssignment reads the topics' replicas from the metadata, and checks that every
// topic exists and every broker of brokers is one of the cluster's (registered and not
// fenced), naming all that are not.
func currentAssignment(ctx context.Context, c *client.Conn, ttm reassign.TopicsToMove, brokers []int32) (reassign.Plan, error) {
	req := wire.MetadataRequest{Version: 1}
	for _, t := range ttm.Topics {
		req.Topics = append(req.Topics, t.Topic)
	}
	md := wire.MetadataResponse{Version: 1}
	if err := c.Call(ctx, &req, &md); err != nil {
		return reassign.Plan{}, err
	}
	var probs []string
	var known []int32
	for _, br := range md.Brokers {
		known = append(known, br.NodeID)
	}
	slices.Sort(known)
	for _, b := range brokers {
		if !slices.Contains(known, b) {
			probs = append(probs, fmt.Sprintf("broker %d is not in the cluster (its brokers: %s)", b, joinIDs(known)))
		}
	}
	current := reassign.Plan{Version: 1}
	for _, t := range md.Topics {
		switch {
		case t.ErrorCode == wire.ErrUnknownTopicOrPartition:
			probs = append(probs, fmt.Sprintf("topic %q not found", t.Topic))
			continue
		case t.ErrorCode != wire.NoError:
			probs = append(probs, fmt.Sprintf("topic %q: %v", t.Topic, t.ErrorCode))
			continue
		}
		for _, p := range t.Partitions {
			current.Partitions = append(current.Partitions, reassign.PartitionPlan{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas})
		}
	}
	if len(probs) > 0 {
		return reassign.Plan{}, errors.New(strings.Join(probs, "; "))
	}
	return current, nil
}

// writeGenerated prints the two plans as kafka-reassign-partitions --generate does.
func writeGenerated(w io.Writer, current, proposed reassign.Plan) {
	fmt.Fprintf(w, "Current partition replica assignment\n%s\n\n", current.Format())
	fmt.Fprintf(w, "Proposed partition reassignment configuration\n%s\n", proposed.Format())
}
