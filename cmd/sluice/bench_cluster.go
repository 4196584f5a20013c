package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/bench"
)

// benchClusterOptions are the flags of a run against a cluster of broker processes that the
// bench starts itself (--brokers N): `sluice cluster local`'s nodes, on free ports.
type benchClusterOptions struct {
	brokers           int
	replicationFactor int
	minInsyncReplicas int
	props             []string
	// followerLag samples each follower's lag this often (produce and e2e; 0 for none).
	followerLag time.Duration
}

// The bounds of a bench cluster's life: its start (every broker answering, the controller
// quorum formed) and its stop (each broker's controlled shutdown).
const (
	benchClusterReadyTimeout = 60 * time.Second
	benchClusterStopTimeout  = 30 * time.Second
)

// addClusterFlags adds --brokers, --replication-factor, --min-insync-replicas and
// --broker-property.
func addClusterFlags(cmd *cobra.Command, o *benchOptions) {
	f := cmd.Flags()
	f.IntVar(&o.cluster.brokers, "brokers", 0, "start a cluster of this many broker processes on this host (cluster local's nodes, each a controller voter, on free loopback ports, in a temporary directory under --data-dir) and run against it, bootstrapping from all of them; stopped at the end, its logs kept if the run fails")
	f.IntVar(&o.cluster.replicationFactor, "replication-factor", 0, "with --brokers: the replication factor of the run's topics (default: the brokers' default.replication.factor, 1 as Kafka's)")
	f.IntVar(&o.cluster.minInsyncReplicas, "min-insync-replicas", 0, "with --brokers: the run's topics' min.insync.replicas, the replicas that must be in sync for acks=all (default: the brokers' min.insync.replicas, 1 as Kafka's; 2 with RF 3 is the usual production setting)")
	if o.mode != bench.ModeConsume {
		f.DurationVar(&o.cluster.followerLag, "follower-lag-every", 0, "with --brokers and a replication factor above 1: sample every follower's lag behind its leader (leader LEO - follower LEO) this often during the run and report its p50, p99 and max in records and in ms (0: not sampled)")
	}
	f.StringArrayVar(&o.cluster.props, "broker-property", nil, "with --brokers: a server property `key=value` for every broker (repeatable), as cluster local's --property; controlled.shutdown.enable=false unless given, since the cluster's data goes with it")
}

// shape is the cluster the flags describe.
func (c benchClusterOptions) shape() bench.ClusterShape {
	return bench.ClusterShape{Brokers: c.brokers, TopicShape: bench.TopicShape{ReplicationFactor: c.replicationFactor, MinInsyncReplicas: c.minInsyncReplicas}}
}

// checkClusterFlags refuses the flags a cluster run cannot honour. A cluster run is an
// embedded one (the bench starts what it measures), so after this checkFlags treats it as one.
func (o *benchOptions) checkClusterFlags(cmd *cobra.Command) error {
	f := cmd.Flags()
	if f.Lookup("brokers") == nil {
		return nil
	}
	given := f.Changed
	if !given("brokers") {
		for _, name := range []string{"replication-factor", "min-insync-replicas", "broker-property", "follower-lag-every"} {
			if given(name) {
				return fmt.Errorf("--%s needs --brokers (the cluster the bench starts)", name)
			}
		}
		return nil
	}
	switch {
	case given("embedded"):
		return errors.New("--brokers starts a cluster of broker processes: --embedded (one broker) cannot be given with it")
	case given("broker"):
		return errors.New("--brokers starts its own cluster: --broker cannot be given with it")
	case given("broker-process"):
		return errors.New("--brokers runs every broker as a process already: --broker-process cannot be given with it")
	case given("broker-config"):
		return errors.New("--broker-config is for one embedded broker: give a cluster's brokers their settings with --broker-property key=value")
	case given("transport") && o.transport != bench.TransportTCP:
		return errors.New("--transport unix with --brokers: the clients reach a cluster over TCP (each broker's unix socket serves only its own partitions)")
	case o.driver != "sluice":
		return fmt.Errorf("--brokers starts Sluice brokers: --driver %s cannot be given with it", o.driver)
	case given("cpuprofile"):
		return errors.New("--cpuprofile with --brokers would profile only the harness: profile a broker with cluster local and serve's --cpuprofile")
	}
	if err := o.cluster.shape().Check(); err != nil {
		return fmt.Errorf("--brokers %d --replication-factor %d --min-insync-replicas %d: %w",
			o.cluster.brokers, o.cluster.replicationFactor, o.cluster.minInsyncReplicas, err)
	}
	if err := checkServerProperties(o.cluster.props); err != nil {
		return err
	}
	switch {
	case o.cluster.followerLag < 0:
		return fmt.Errorf("--follower-lag-every %v: cannot be negative", o.cluster.followerLag)
	case o.cluster.followerLag > 0 && o.cluster.replicationFactor < 2:
		return fmt.Errorf("--follower-lag-every: a replication factor of %d has no followers (give --replication-factor 2 or more)", max(o.cluster.replicationFactor, 1))
	}
	o.embedded = true
	return nil
}

// benchCluster is a cluster of broker processes one run goes against: the `cluster local`
// child that owns them, and its directory (the nodes' data, properties and logs).
type benchCluster struct {
	proc *clusterProc
	dir  string
}

// startBenchCluster starts `cluster local` with the shape's brokers on free ports in a new
// temporary directory under o.dataDir, and waits until every broker answers; ctx ends the
// wait (Ctrl-C), and then the cluster is stopped. On a failure to start the directory is kept
// for its logs, which the error names.
func startBenchCluster(ctx context.Context, o *benchOptions, stderr io.Writer) (*benchCluster, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--brokers: finding this binary to run its cluster local: %w", err)
	}
	dir, err := os.MkdirTemp(o.dataDir, "sluice-bench-cluster-")
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil { // the messages name it
		return nil, err
	}
	args := []string{"--brokers", strconv.Itoa(o.cluster.brokers), "--base-port", "0", "--data-dir", dir,
		"--log-level", "warn", "--stop-timeout", benchClusterStopTimeout.String()}
	// The cluster's data goes with it, so a controlled shutdown at the end only costs time:
	// brokers stopped together leave the last partition leaders without a quorum to move
	// their leaderships, and each waits out its attempt (9 s for a topic of RF 3).
	props := o.cluster.props
	if !slices.ContainsFunc(props, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return strings.TrimSpace(k) == "controlled.shutdown.enable"
	}) {
		props = append([]string{"controlled.shutdown.enable=false"}, props...)
	}
	for _, p := range props {
		args = append(args, "--property", p)
	}
	fmt.Fprintf(stderr, "starting a cluster of %d broker processes in %s\n", o.cluster.brokers, dir)
	start := time.Now()
	p, err := startClusterProcContext(ctx, exe, args, benchClusterReadyTimeout)
	if err != nil {
		return nil, fmt.Errorf("--brokers: %w\nthe brokers' data and logs are kept in %s", err, dir)
	}
	fmt.Fprintf(stderr, "cluster ready in %.1f s: %s\n", time.Since(start).Seconds(), strings.Join(p.bootstrap, ","))
	return &benchCluster{proc: p, dir: dir}, nil
}

// driver is a bench driver for the cluster: every broker's listener to bootstrap from, the
// run's topics in the flags' shape, the brokers' pids for their CPU and memory.
func (c *benchCluster) driver(ctx context.Context, o *benchOptions, stderr io.Writer) (bench.Driver, error) {
	ids := make([]int32, 0, len(c.proc.nodes))
	for id := range c.proc.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	procs := make([]bench.ClusterBroker, len(ids))
	for i, id := range ids {
		procs[i] = bench.ClusterBroker{ID: id, PID: c.proc.nodes[id].pid}
	}
	return bench.ClusterSluice(ctx, c.proc.bootstrap, o.cluster.shape(), procs, benchLogger(stderr))
}

// exitedBrokers names the brokers that exited while the cluster ran (cluster local reports
// each as "node N (pid P) exited: ..."): a run across such an exit measured a smaller cluster.
func (c *benchCluster) exitedBrokers() []string {
	var out []string
	for _, line := range strings.Split(c.proc.out.String(), "\n") {
		if strings.HasPrefix(line, "node ") && strings.Contains(line, ") exited: ") {
			out = append(out, line)
		}
	}
	return out
}

// stop stops the cluster (SIGTERM to cluster local, which stops each broker by its pid) and
// removes its directory, unless failed: then the directory stays, with the brokers' logs,
// and stop says where.
func (c *benchCluster) stop(failed bool, stderr io.Writer) error {
	start := time.Now()
	err := c.proc.Stop(benchClusterStopTimeout + 10*time.Second)
	fmt.Fprintf(stderr, "cluster stopped in %.1f s\n", time.Since(start).Seconds())
	if failed || err != nil {
		fmt.Fprintf(stderr, "the cluster's data and logs are kept in %s\n", c.dir)
		return err
	}
	return errors.Join(err, os.RemoveAll(c.dir))
}

// runOnCluster is runOnce for --brokers: a fresh cluster for the run, stopped after it.
func runOnCluster(ctx context.Context, o *benchOptions, stderr io.Writer, run func(ctx context.Context, d bench.Driver, stderr io.Writer) (bench.Result, error)) (bench.Result, error) {
	c, err := startBenchCluster(ctx, o, stderr)
	if err != nil {
		return bench.Result{}, err
	}
	var r bench.Result
	d, err := c.driver(ctx, o, stderr)
	if err == nil {
		r, err = run(ctx, d, stderr)
		if cerr := d.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", d.Name(), cerr)
		}
	}
	if exited := c.exitedBrokers(); len(exited) > 0 {
		err = errors.Join(err, fmt.Errorf("brokers exited during the run:\n%s", strings.Join(exited, "\n")))
	}
	return r, errors.Join(err, c.stop(err != nil, stderr))
}
