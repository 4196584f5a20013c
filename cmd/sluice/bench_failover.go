package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// failoverOptions are `bench failover`'s flags.
type failoverOptions struct {
	scenarios  []string
	runs       int
	brokers    int
	dataDir    string
	sessionMs  []int
	partitions int
	props      []string
	jsonOut    bool
}

// The scenarios of `bench failover`, in the order "all" runs them.
var failoverScenarios = []string{"controller", "leader", "shutdown", "scale"}

func benchFailoverCmd() *cobra.Command {
	var o failoverOptions
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Measure a local cluster's failovers: controller, partition leader, controlled shutdown; and its scale",
		Long: `Start a cluster of broker processes (cluster local, on free ports, a fresh data directory each
run) --runs times per scenario and measure, printing each run and the medians:

  controller  kill -9 of the active controller until a new one commits a metadata change
              (a topic creation retried with a 1 s timeout succeeds): the time to that success.
  leader      kill -9 of a partition's leader under an acks=1 producer (one record at a time,
              delivery.timeout.ms 30 s) until a record is acknowledged again, once per
              --session-timeout-ms (broker.session.timeout.ms; default: Kafka's 9000, and 2000).
  shutdown    SIGTERM of the leader (controlled shutdown) under the same producer: the errors
              and the longest pause between two acknowledgements, until 100 records after it.
  scale       --partitions partitions of RF 3 in one topic: the time to create them, a
              metadata request for all of them (median of 5), and each broker's RSS and idle
              CPU (10 s after the creation, for 5 s) from /proc.

Not run in CI: a run takes seconds to minutes. The machine's load skews every figure: say what
else ran.`,
		Args: noArgs(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchFailover(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.scenarios, "scenario", []string{"all"}, "which: controller, leader, shutdown, scale, or all (comma-separated)")
	f.IntVar(&o.runs, "runs", 3, "runs per scenario (the median is reported)")
	f.IntVar(&o.brokers, "brokers", 3, "brokers in the cluster")
	f.StringVar(&o.dataDir, "data-dir", os.TempDir(), "where each run's cluster directory is made (and removed after)")
	f.IntSliceVar(&o.sessionMs, "session-timeout-ms", []int{9000, 2000}, "broker.session.timeout.ms values the leader scenario runs with")
	f.IntVar(&o.partitions, "partitions", 3000, "partitions the scale scenario creates (RF 3)")
	f.StringArrayVar(&o.props, "property", nil, "an extra server property `key=value` for every broker (repeatable)")
	f.BoolVar(&o.jsonOut, "json", false, "print one JSON object with every run and median on stdout")
	return cmd
}

// failoverRun is one measured run; its figures by name.
type failoverRun map[string]float64

func runBenchFailover(ctx context.Context, o failoverOptions, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var scenarios []string
	for _, s := range o.scenarios {
		switch {
		case s == "all":
			scenarios = append(scenarios, failoverScenarios...)
		case slices.Contains(failoverScenarios, s):
			scenarios = append(scenarios, s)
		default:
			return fmt.Errorf("--scenario %s: want %s or all", s, strings.Join(failoverScenarios, ", "))
		}
	}
	if o.runs < 1 || o.brokers < 3 {
		return errors.New("--runs must be at least 1 and --brokers at least 3 (RF 3)")
	}
	type job struct {
		name  string
		props []string
		run   func(ctx context.Context, lc *clusterProc) (failoverRun, error)
	}
	var jobs []job
	for _, s := range scenarios {
		switch s {
		case "controller":
			jobs = append(jobs, job{"controller", nil, failoverController})
		case "leader":
			for _, ms := range o.sessionMs {
				jobs = append(jobs, job{fmt.Sprintf("leader/session-%dms", ms), sessionProps(ms),
					func(ctx context.Context, lc *clusterProc) (failoverRun, error) {
						return failoverLeader(ctx, lc, syscall.SIGKILL)
					}})
			}
		case "shutdown":
			jobs = append(jobs, job{"shutdown", nil,
				func(ctx context.Context, lc *clusterProc) (failoverRun, error) {
					return failoverLeader(ctx, lc, syscall.SIGTERM)
				}})
		case "scale":
			jobs = append(jobs, job{"scale", nil,
				func(ctx context.Context, lc *clusterProc) (failoverRun, error) {
					return failoverScale(ctx, lc, o.partitions)
				}})
		}
	}
	results := map[string][]failoverRun{}
	medians := map[string]failoverRun{}
	for _, j := range jobs {
		for i := range o.runs {
			r, err := func() (failoverRun, error) {
				dir, err := os.MkdirTemp(o.dataDir, "sluice-failover-*")
				if err != nil {
					return nil, err
				}
				defer os.RemoveAll(dir)
				args := []string{"--brokers", strconv.Itoa(o.brokers), "--base-port", "0", "--data-dir", dir, "--log-level", "warn"}
				for _, p := range append(slices.Clone(o.props), j.props...) {
					args = append(args, "--property", p)
				}
				lc, err := startClusterProc(exe, args, 60*time.Second)
				if err != nil {
					return nil, err
				}
				defer func() {
					if err := lc.Stop(30 * time.Second); err != nil {
						fmt.Fprintln(stderr, "bench failover:", err)
					}
				}()
				rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
				defer cancel()
				return j.run(rctx, lc)
			}()
			if err != nil {
				return fmt.Errorf("%s run %d: %w", j.name, i+1, err)
			}
			results[j.name] = append(results[j.name], r)
			fmt.Fprintf(stderr, "%s run %d: %s\n", j.name, i+1, formatRun(r))
		}
		medians[j.name] = medianRun(results[j.name])
		if !o.jsonOut {
			fmt.Fprintf(stdout, "%s (median of %d): %s\n", j.name, o.runs, formatRun(medians[j.name]))
		}
	}
	if o.jsonOut {
		return json.NewEncoder(stdout).Encode(map[string]any{"runs": results, "medians": medians, "brokers": o.brokers})
	}
	return nil
}

// formatRun prints a run's figures, by name.
func formatRun(r failoverRun) string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.4g", k, r[k])
	}
	return strings.Join(parts, " ")
}

// medianRun is each figure's median over runs.
func medianRun(runs []failoverRun) failoverRun {
	out := failoverRun{}
	for k := range runs[0] {
		var vs []float64
		for _, r := range runs {
			if v, ok := r[k]; ok {
				vs = append(vs, v)
			}
		}
		slices.Sort(vs)
		m := vs[len(vs)/2]
		if len(vs)%2 == 0 {
			m = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
		}
		out[k] = m
	}
	return out
}

// activeController asks the brokers for the cluster's active controller.
func activeController(ctx context.Context, bootstrap []string) (int32, error) {
	var last error = errors.New("no broker answered")
	for _, addr := range bootstrap {
		id, err := func() (int32, error) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			c, err := client.Dial(cctx, addr, "sluice-bench")
			if err != nil {
				return -1, err
			}
			defer c.Close()
			var resp wire.DescribeClusterResponse
			if err := c.Call(cctx, &wire.DescribeClusterRequest{}, &resp); err != nil {
				return -1, err
			}
			if resp.ControllerID < 0 {
				return -1, errors.New("no active controller")
			}
			return resp.ControllerID, nil
		}()
		if err == nil {
			return id, nil
		}
		last = err
	}
	return -1, last
}

// failoverController kills the active controller and times the first topic creation that
// succeeds after it.
func failoverController(ctx context.Context, lc *clusterProc) (failoverRun, error) {
	ctrl, err := activeController(ctx, lc.bootstrap)
	if err != nil {
		return nil, err
	}
	if err := lc.Signal(ctrl, syscall.SIGKILL); err != nil {
		return nil, err
	}
	killed := time.Now()
	rest := survivors(lc, ctrl)
	for attempt := 0; ; attempt++ {
		err := func() error {
			actx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			a, err := client.NewAdminWithConfig(actx, client.AdminConfig{Config: client.Config{Brokers: []string{rest[attempt%len(rest)]}, RequestTimeout: time.Second}})
			if err != nil {
				return err
			}
			defer a.Close()
			return a.CreateTopic(actx, client.TopicSpec{Name: fmt.Sprintf("after-controller-kill-%d", attempt), Partitions: 1, ReplicationFactor: 1})
		}()
		if err == nil {
			newCtrl, _ := activeController(ctx, rest)
			return failoverRun{"seconds": time.Since(killed).Seconds(), "attempts": float64(attempt + 1), "new_controller": float64(newCtrl)}, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no metadata change committed %v after the kill of controller %d: %w", time.Since(killed), ctrl, err)
		}
	}
}

// survivors is the bootstrap list without node dead's address.
func survivors(lc *clusterProc, dead int32) []string {
	var out []string
	for id, n := range lc.nodes {
		if id != dead {
			out = append(out, n.listen)
		}
	}
	slices.Sort(out)
	return out
}

// failoverLeader signals the leader of a new RF-3 partition (SIGKILL: a crash; SIGTERM: a
// controlled shutdown) under an acks=1 producer sending one record at a time, and measures
// until 100 records are acknowledged after the signal: the time to the first, the errors, and
// the longest pause between two acknowledgements.
func failoverLeader(ctx context.Context, lc *clusterProc, sig syscall.Signal) (failoverRun, error) {
	const topic = "failover"
	if err := createTopicRF3(ctx, lc.bootstrap, topic, 1); err != nil {
		return nil, err
	}
	leader, _, err := waitLeader(ctx, lc.bootstrap, topic, -1)
	if err != nil {
		return nil, err
	}
	p, err := client.NewProducer(ctx, client.ProducerConfig{
		Config: client.Config{Brokers: lc.bootstrap, RequestTimeout: 5 * time.Second},
		Acks:   client.AcksLeader, DeliveryTimeout: 30 * time.Second, Linger: -1, MaxInFlight: 1,
	})
	if err != nil {
		return nil, err
	}
	defer p.Close(context.Background())
	send := func(i int) error {
		done := make(chan error, 1)
		p.Send(ctx, &client.Record{Topic: topic, Partition: 0, PartitionSet: true, Value: []byte(strconv.Itoa(i))}, func(_ client.RecordMetadata, err error) { done <- err })
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range 100 {
		if err := send(i); err != nil {
			return nil, fmt.Errorf("produce before the signal: %w", err)
		}
	}
	if err := lc.Signal(leader, sig); err != nil {
		return nil, err
	}
	signalled := time.Now()
	last := signalled
	var first, longest time.Duration
	errs, acked := 0, 0
	for i := 100; acked < 100; i++ {
		if err := send(i); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("produce did not resume after %v of signal %v to leader %d: %w", time.Since(signalled), sig, leader, err)
			}
			errs++
			continue
		}
		now := time.Now()
		if acked == 0 {
			first = now.Sub(signalled)
		}
		longest = max(longest, now.Sub(last))
		last = now
		acked++
	}
	return failoverRun{"first_ack_seconds": first.Seconds(), "longest_pause_ms": float64(longest.Milliseconds()), "errors": float64(errs)}, nil
}

// createTopicRF3 creates topic with partitions partitions of RF 3, waiting up to two minutes.
func createTopicRF3(ctx context.Context, bootstrap []string, topic string, partitions int32) error {
	a, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: bootstrap, RequestTimeout: 2 * time.Minute}})
	if err != nil {
		return err
	}
	defer a.Close()
	return a.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: partitions, ReplicationFactor: 3})
}

// failoverScale creates n partitions of RF 3 and measures the creation, a metadata request for
// all of them, and each broker's RSS and idle CPU.
func failoverScale(ctx context.Context, lc *clusterProc, n int) (failoverRun, error) {
	start := time.Now()
	if err := createTopicRF3(ctx, lc.bootstrap, "scale", int32(n)); err != nil {
		return nil, err
	}
	r := failoverRun{"create_seconds": time.Since(start).Seconds()}
	c, err := client.Dial(ctx, lc.bootstrap[0], "sluice-bench")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var times []float64
	for range 5 {
		var md wire.MetadataResponse
		t0 := time.Now()
		if err := c.Call(ctx, &wire.MetadataRequest{}, &md); err != nil {
			return nil, err
		}
		times = append(times, float64(time.Since(t0).Microseconds())/1000)
		parts := 0
		for _, t := range md.Topics {
			parts += len(t.Partitions)
		}
		if parts < n {
			return nil, fmt.Errorf("metadata lists %d partitions, want at least %d", parts, n)
		}
	}
	slices.Sort(times)
	r["metadata_all_ms"] = times[len(times)/2]
	// Idle: let the creation's work settle, then sample every broker over the same 5 s.
	select {
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	before := map[int32]float64{}
	for id, node := range lc.nodes {
		cpu, err := procCPUSeconds(node.pid)
		if err != nil {
			return r, nil // not Linux: no /proc figures
		}
		before[id] = cpu
	}
	t0 := time.Now()
	select {
	case <-time.After(5 * time.Second):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	elapsed := time.Since(t0).Seconds()
	for id, node := range lc.nodes {
		cpu, err := procCPUSeconds(node.pid)
		if err != nil {
			return nil, err
		}
		rss, err := procRSSMiB(node.pid)
		if err != nil {
			return nil, err
		}
		r[fmt.Sprintf("broker%d_idle_cpu_pct", id)] = 100 * (cpu - before[id]) / elapsed
		r[fmt.Sprintf("broker%d_rss_mib", id)] = rss
	}
	return r, nil
}

// procCPUSeconds is a process's user and system CPU time, from /proc/<pid>/stat (Linux).
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	// utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
	ut, err1 := strconv.ParseFloat(fields[11], 64)
	st, err2 := strconv.ParseFloat(fields[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const clockTicks = 100 // USER_HZ, 100 on every Linux architecture Go supports
	return (ut + st) / clockTicks, nil
}

// procRSSMiB is a process's resident set, from /proc/<pid>/status's VmRSS (Linux).
func procRSSMiB(pid int) (float64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// sessionProps sets broker.session.timeout.ms to ms with a heartbeat interval that fits in it:
// Kafka's 2000 ms, or a quarter of the session when that is shorter (a session must outlast a
// few heartbeats, and the broker refuses one not above its interval).
func sessionProps(ms int) []string {
	hb := min(2000, ms/4)
	return []string{fmt.Sprintf("broker.session.timeout.ms=%d", ms), fmt.Sprintf("broker.heartbeat.interval.ms=%d", max(hb, 1))}
}
