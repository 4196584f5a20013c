package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/reassign"
)

// The subcommands that carry a plan out: execute, verify, cancel, list
// (kafka-reassign-partitions --execute, --verify, --cancel, --list).

// readPlan reads and checks a --reassignment-json-file.
func readPlan(path string) (reassign.Plan, error) {
	if path == "" {
		return reassign.Plan{}, errors.New("--reassignment-json-file is required")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return reassign.Plan{}, err
	}
	p, err := reassign.ParsePlan(b)
	if err == nil {
		err = p.Validate()
	}
	if err != nil {
		return reassign.Plan{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// assignments is the cluster's replica lists by partition.
func assignments(ctx context.Context, a *client.Admin) (map[client.TopicPartition][]int32, error) {
	topics, err := a.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[client.TopicPartition][]int32{}
	for _, t := range topics {
		for _, p := range t.Partitions {
			out[client.TopicPartition{Topic: t.Name, Partition: p.Partition}] = p.Replicas
		}
	}
	return out, nil
}

// planBrokers is every broker a plan names, with those its partitions are on now: the brokers
// whose throttles a move uses.
func planBrokers(p reassign.Plan, current map[client.TopicPartition][]int32) []int32 {
	var ids []int32
	for _, pp := range p.Partitions {
		for _, id := range append(slices.Clone(pp.Replicas), current[client.TopicPartition{Topic: pp.Topic, Partition: pp.Partition}]...) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// setThrottle sets (rate > 0) or removes (rate 0) both replication throttle rates on brokers.
func setThrottle(ctx context.Context, a *client.Admin, brokers []int32, rate int64) error {
	var errs []error
	for _, id := range brokers {
		var err error
		if rate > 0 {
			v := strconv.FormatInt(rate, 10)
			err = a.AlterBrokerConfigs(ctx, strconv.Itoa(int(id)), map[string]string{client.LeaderThrottledRate: v, client.FollowerThrottledRate: v}, nil)
		} else {
			err = a.AlterBrokerConfigs(ctx, strconv.Itoa(int(id)), nil, []string{client.LeaderThrottledRate, client.FollowerThrottledRate})
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// clearThrottles removes the replication throttle rates (a broker's own, not the cluster-wide
// default) once a plan's moves are over, done or cancelled: from every broker of candidates
// that has one, except those another move still in progress has a replica on. A rate caps every
// throttled replica of its broker, so clearing it under an earlier move still catching up
// would lift that move's throttle too. candidates are all the cluster's brokers, not only the
// plan's: a move that is done no longer says which brokers it left. It says which brokers it
// cleared and which it left throttled, for which moves (the lines to print, none if no
// broker had a rate).
func clearThrottles(ctx context.Context, a *client.Admin, plan reassign.Plan, candidates []int32) ([]string, error) {
	moving, err := a.ListPartitionReassignments(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing the moves in progress: %w", err)
	}
	ours := map[client.TopicPartition]bool{}
	for _, pp := range plan.Partitions {
		ours[client.TopicPartition{Topic: pp.Topic, Partition: pp.Partition}] = true
	}
	busy := map[int32][]string{} // broker → the other moves in progress with a replica on it
	for _, m := range moving {
		if ours[m.TopicPartition] { // a metadata copy a moment behind the plan's cancel
			continue
		}
		for _, id := range m.Replicas {
			busy[id] = append(busy[id], fmt.Sprintf("%s-%d", m.Topic, m.Partition))
		}
	}
	var clear, keep []int32
	var others []string
	for _, id := range candidates {
		cfgs, err := a.DescribeBrokerConfigs(ctx, strconv.Itoa(int(id)))
		if err != nil {
			return nil, fmt.Errorf("reading the throttles: %w", err)
		}
		_, leader := cfgs[client.LeaderThrottledRate]
		_, follower := cfgs[client.FollowerThrottledRate]
		switch {
		case !leader && !follower:
		case len(busy[id]) == 0:
			clear = append(clear, id)
		default:
			keep = append(keep, id)
			for _, name := range busy[id] {
				if !slices.Contains(others, name) {
					others = append(others, name)
				}
			}
		}
	}
	var lines []string
	if len(clear) > 0 {
		if err := setThrottle(ctx, a, clear, 0); err != nil {
			return nil, fmt.Errorf("clearing the throttles: %w", err)
		}
		lines = append(lines, fmt.Sprintf("Clearing broker-level throttles on brokers %s", joinIDs(clear)))
	}
	if len(keep) > 0 {
		sort.Strings(others)
		lines = append(lines, fmt.Sprintf("Keeping the throttles on brokers %s: moves still in progress use them (%s)", joinIDs(keep), strings.Join(others, ",")))
	}
	return lines, nil
}

// clusterBrokers is the ids of the brokers the metadata lists, with those of brokers (the
// plan's, which a broker that is down may be among), sorted.
func clusterBrokers(env *adminEnv, brokers []int32) ([]int32, error) {
	ids := slices.Clone(brokers)
	err := env.withConn(func(ctx context.Context, c *client.Conn) error {
		md := wire.MetadataResponse{Version: 1}
		if err := c.Call(ctx, &wire.MetadataRequest{Version: 1, Topics: []string{}}, &md); err != nil {
			return err
		}
		for _, b := range md.Brokers {
			if !slices.Contains(ids, b.NodeID) {
				ids = append(ids, b.NodeID)
			}
		}
		return nil
	})
	slices.Sort(ids)
	return ids, err
}

func reassignExecuteCmd(parent *cobra.Command, env *adminEnv) *cobra.Command {
	var file string
	var throttle int64
	cmd := &cobra.Command{
		Use:   "execute --reassignment-json-file F [--throttle BYTES_PER_S]",
		Short: "Start the moves of a plan",
		Long: `Start the moves of a reassignment plan (Kafka's JSON, as generate prints it), as
kafka-reassign-partitions --execute does. Each partition's replica set becomes its current
replicas and the plan's together; the new replicas catch up by fetching from the leader and join
the ISR, the leadership moves to the plan's first replica if the leader is not in the plan, and
only then are the replicas the plan drops removed and their data deleted. A replica list longer
or shorter than the current one changes the partition's replication factor.

Once the plan is taken, the assignment before it is printed: keep it, it is the plan that moves
everything back. A plan with any problem (a broker or partition that does not exist, a replica twice, a partition
already being moved) is refused as a whole, every problem listed, and nothing starts (the
throttle rates go back to what they were).

--throttle caps the bytes per second the new replicas catch up with, on every broker the plan
names (leader.replication.throttled.rate and follower.replication.throttled.rate); verify
removes it once every move of the plan is done.`,
		Args: noArgs("the plan is in --reassignment-json-file"),
		RunE: func(_ *cobra.Command, _ []string) error {
			if throttle < 0 {
				return fmt.Errorf("--throttle %d: want bytes per second ≥ 1 (or leave it out)", throttle)
			}
			plan, err := readPlan(file)
			if err != nil {
				return err
			}
			out := parent.OutOrStdout()
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				current, err := assignments(ctx, a)
				if err != nil {
					return err
				}
				brokers := planBrokers(plan, current)
				// The rates in force before, put back if the plan is refused (a throttle an
				// earlier move set must survive a refused one).
				before := map[int32]map[string]string{}
				if throttle > 0 {
					for _, id := range brokers {
						cfgs, err := a.DescribeBrokerConfigs(ctx, strconv.Itoa(int(id)))
						if err != nil {
							return err
						}
						before[id] = cfgs
					}
					if err := setThrottle(ctx, a, brokers, throttle); err != nil {
						return fmt.Errorf("setting the throttle: %w", err)
					}
				}
				var rs []client.Reassignment
				for _, pp := range plan.Partitions {
					rs = append(rs, client.Reassignment{Topic: pp.Topic, Partition: pp.Partition, Replicas: pp.Replicas})
				}
				if err := a.AlterPartitionReassignments(ctx, rs); err != nil {
					var restoreErrs []error
					for id, cfgs := range before { // nothing started: the rates go back as they were
						var del []string
						for _, k := range []string{client.LeaderThrottledRate, client.FollowerThrottledRate} {
							if _, ok := cfgs[k]; !ok {
								del = append(del, k)
							}
						}
						if rerr := a.AlterBrokerConfigs(ctx, strconv.Itoa(int(id)), cfgs, del); rerr != nil {
							restoreErrs = append(restoreErrs, fmt.Errorf("putting broker %d's throttle rates back: %w", id, rerr))
						}
					}
					var refused *client.ReassignmentError
					if errors.As(err, &refused) && refused.Message != "" {
						// The controller's list of every problem, said once.
						err = fmt.Errorf("%s: plan refused, nothing started: %s", file, strings.TrimPrefix(refused.Message, "nothing started: "))
					}
					return errors.Join(append([]error{err}, restoreErrs...)...)
				}
				// The rollback plan, once the plan is taken (a refused one moved nothing).
				writeCurrent(out, plan, current)
				if throttle > 0 {
					fmt.Fprintf(out, "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.\n")
					fmt.Fprintf(out, "The inter-broker throttle limit was set to %d B/s on brokers %s\n", throttle, joinIDs(brokers))
				}
				fmt.Fprintf(out, "Successfully started partition reassignments for %s\n", partitionNames(plan))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&file, "reassignment-json-file", "", "the plan, Kafka's JSON: {\"version\":1,\"partitions\":[{\"topic\":\"foo\",\"partition\":0,\"replicas\":[1,2]}]}")
	cmd.Flags().Int64Var(&throttle, "throttle", 0, "cap, in bytes per second, of what the new replicas catch up with (removed by verify when done)")
	return cmd
}

// writeCurrent prints the plan's partitions as they are now, as Kafka's --execute does, so
// that the operator can move them back.
func writeCurrent(w io.Writer, plan reassign.Plan, current map[client.TopicPartition][]int32) {
	back := reassign.Plan{Version: 1}
	for _, pp := range plan.Partitions {
		if r, ok := current[client.TopicPartition{Topic: pp.Topic, Partition: pp.Partition}]; ok {
			back.Partitions = append(back.Partitions, reassign.PartitionPlan{Topic: pp.Topic, Partition: pp.Partition, Replicas: r})
		}
	}
	fmt.Fprintf(w, "Current partition replica assignment\n\n%s\n\nSave this to use as the --reassignment-json-file option during rollback\n", back.Format())
}

func partitionNames(plan reassign.Plan) string {
	names := make([]string, len(plan.Partitions))
	for i, pp := range plan.Partitions {
		names[i] = fmt.Sprintf("%s-%d", pp.Topic, pp.Partition)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func reassignVerifyCmd(parent *cobra.Command, env *adminEnv) *cobra.Command {
	var file string
	var preserve bool
	cmd := &cobra.Command{
		Use:   "verify --reassignment-json-file F",
		Short: "Say per partition whether its move is done, in progress (with bytes left) or failed",
		Long: `Say, for each partition of a plan, whether its move is complete, still in progress (with the
bytes each new replica has left to fetch) or failed (not moving, and not at the plan's replicas:
cancelled, or moved elsewhere since), as kafka-reassign-partitions --verify does. Once no move
of the plan is in progress, the brokers' replication throttle rates are removed (unless
--preserve-throttles), except on brokers another move still in progress has a replica on:
those keep theirs until that move's verify. Exits with an error while any move failed.`,
		Args: noArgs("the plan is in --reassignment-json-file"),
		RunE: func(_ *cobra.Command, _ []string) error {
			plan, err := readPlan(file)
			if err != nil {
				return err
			}
			out := parent.OutOrStdout()
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				st, err := planStatus(ctx, a, plan)
				if err != nil {
					return err
				}
				fmt.Fprintln(out, "Status of partition reassignment:")
				var failed []string
				for _, s := range st.parts {
					fmt.Fprintln(out, s.line)
					if s.failed {
						failed = append(failed, s.name)
					}
				}
				if st.inProgress == 0 && !preserve {
					brokers, err := clusterBrokers(env, planBrokers(plan, st.current))
					if err != nil {
						return err
					}
					lines, err := clearThrottles(ctx, a, plan, brokers)
					if err != nil {
						return err
					}
					if len(lines) > 0 {
						fmt.Fprintf(out, "\n%s\n", strings.Join(lines, "\n"))
					}
				}
				if len(failed) > 0 {
					return fmt.Errorf("reassignment failed for %s", strings.Join(failed, ","))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&file, "reassignment-json-file", "", "the plan that was executed")
	cmd.Flags().BoolVar(&preserve, "preserve-throttles", false, "keep the throttles even when every move is done")
	return cmd
}

type partStatus struct {
	name   string
	line   string
	failed bool
}

type planState struct {
	parts      []partStatus
	inProgress int
	current    map[client.TopicPartition][]int32
}

// planStatus reads each plan partition's state: moving (with each adding replica's bytes
// left, from its leader's DescribeReplicas), at the plan's replicas, or neither.
func planStatus(ctx context.Context, a *client.Admin, plan reassign.Plan) (planState, error) {
	current, err := assignments(ctx, a)
	if err != nil {
		return planState{}, err
	}
	var tps []client.TopicPartition
	topics := map[string]bool{}
	for _, pp := range plan.Partitions {
		tps = append(tps, client.TopicPartition{Topic: pp.Topic, Partition: pp.Partition})
		topics[pp.Topic] = true
	}
	moving, err := a.ListPartitionReassignments(ctx, tps)
	if err != nil {
		return planState{}, err
	}
	byTP := map[client.TopicPartition]client.PartitionReassignment{}
	for _, m := range moving {
		byTP[m.TopicPartition] = m
	}
	lagBytes := map[client.TopicPartition]map[int32]int64{}
	if len(moving) > 0 {
		var names []string
		for t := range topics {
			names = append(names, t)
		}
		described, _ := a.DescribeReplicas(ctx, names...) // best effort: bytes left are a hint
		for _, t := range described {
			for _, p := range t.Partitions {
				m := map[int32]int64{}
				for _, r := range p.Replicas {
					m[r.ReplicaID] = r.LagBytes
				}
				lagBytes[client.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = m
			}
		}
	}
	st := planState{current: current}
	for _, pp := range plan.Partitions {
		tp := client.TopicPartition{Topic: pp.Topic, Partition: pp.Partition}
		name := fmt.Sprintf("%s-%d", pp.Topic, pp.Partition)
		s := partStatus{name: name}
		m, isMoving := byTP[tp]
		cur, exists := current[tp]
		switch {
		case isMoving && slices.Equal(m.Target(), pp.Replicas):
			st.inProgress++
			var left []string
			for _, id := range m.Adding {
				switch n, ok := lagBytes[tp][id]; {
				case !ok || n < 0:
					left = append(left, fmt.Sprintf("broker %d: not fetching yet", id))
				default:
					left = append(left, fmt.Sprintf("broker %d: %d bytes left", id, n))
				}
			}
			s.line = fmt.Sprintf("Reassignment of partition %s is still in progress (%s).", name, strings.Join(left, "; "))
			if len(left) == 0 {
				s.line = fmt.Sprintf("Reassignment of partition %s is still in progress (removing %s).", name, joinIDs(m.Removing))
			}
		case isMoving:
			st.inProgress++
			s.failed = true
			s.line = fmt.Sprintf("There is another reassignment of partition %s in progress, to %s.", name, joinIDs(m.Target()))
		case !exists:
			s.failed = true
			s.line = fmt.Sprintf("Partition %s does not exist.", name)
		case slices.Equal(cur, pp.Replicas):
			s.line = fmt.Sprintf("Reassignment of partition %s is complete.", name)
		default:
			s.failed = true
			s.line = fmt.Sprintf("Reassignment of partition %s failed: its replicas are %s, not the plan's %s (cancelled, or moved since).", name, joinIDs(cur), joinIDs(pp.Replicas))
		}
		st.parts = append(st.parts, s)
	}
	return st, nil
}

func reassignCancelCmd(parent *cobra.Command, env *adminEnv) *cobra.Command {
	var file string
	var preserve bool
	cmd := &cobra.Command{
		Use:   "cancel --reassignment-json-file F",
		Short: "Revert the moves of a plan that are not done",
		Long: `Cancel the moves of a plan that are still in progress, as kafka-reassign-partitions --cancel
does: each such partition goes back to its replicas before the move (the replicas being added
are dropped with their data; the leadership returns to an original replica). Moves already done
stay done. The brokers' replication throttle rates are removed (unless --preserve-throttles),
except on brokers another move still in progress has a replica on.`,
		Args: noArgs("the plan is in --reassignment-json-file"),
		RunE: func(_ *cobra.Command, _ []string) error {
			plan, err := readPlan(file)
			if err != nil {
				return err
			}
			out := parent.OutOrStdout()
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				var tps []client.TopicPartition
				for _, pp := range plan.Partitions {
					tps = append(tps, client.TopicPartition{Topic: pp.Topic, Partition: pp.Partition})
				}
				moving, err := a.ListPartitionReassignments(ctx, tps)
				if err != nil {
					return err
				}
				var rs []client.Reassignment
				var names []string
				for _, m := range moving {
					rs = append(rs, client.Reassignment{Topic: m.Topic, Partition: m.Partition})
					names = append(names, fmt.Sprintf("%s-%d", m.Topic, m.Partition))
				}
				if len(rs) > 0 {
					if err := a.AlterPartitionReassignments(ctx, rs); err != nil {
						return err
					}
					fmt.Fprintf(out, "Successfully cancelled partition reassignments for: %s\n", strings.Join(names, ","))
				} else {
					fmt.Fprintln(out, "None of the plan's partitions is being moved: nothing to cancel.")
				}
				if !preserve {
					current, err := assignments(ctx, a)
					if err != nil {
						return err
					}
					brokers, err := clusterBrokers(env, planBrokers(plan, current))
					if err != nil {
						return err
					}
					lines, err := clearThrottles(ctx, a, plan, brokers)
					if err != nil {
						return err
					}
					for _, l := range lines {
						fmt.Fprintln(out, l)
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&file, "reassignment-json-file", "", "the plan whose moves to cancel")
	cmd.Flags().BoolVar(&preserve, "preserve-throttles", false, "keep the throttles")
	return cmd
}

func reassignListCmd(parent *cobra.Command, env *adminEnv) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the moves in progress",
		Args:  noArgs("list takes no arguments"),
		RunE: func(_ *cobra.Command, _ []string) error {
			out := parent.OutOrStdout()
			return env.withAdmin(func(ctx context.Context, a *client.Admin) error {
				moving, err := a.ListPartitionReassignments(ctx, nil)
				if err != nil {
					return err
				}
				if len(moving) == 0 {
					fmt.Fprintln(out, "No partition reassignments found.")
					return nil
				}
				fmt.Fprintln(out, "Current partition reassignments:")
				for _, m := range moving {
					fmt.Fprintf(out, "%s-%d: replicas: %s. adding: %s. removing: %s.\n", m.Topic, m.Partition, joinIDs(m.Replicas), joinIDs(m.Adding), joinIDs(m.Removing))
				}
				return nil
			})
		},
	}
}
