package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/chaos"
)

func chaosCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Inject faults into a local cluster and check that nothing acknowledged is lost",
	}
	cmd.AddCommand(chaosRunCmd(), chaosCheckCmd())
	return cmd
}

func chaosCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check DIR",
		Short: "Check a chaos run's history again and print its verdict",
		Long: `Read DIR/history.jsonl and DIR/final.json (a chaos run's directory), run the checker again with
the options the run used, print the verdict and each anomaly found (at most 20 of each kind);
the exit status is 1 when there is any.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, verdict, err := chaos.CheckDir(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			shown := map[string]int{}
			for _, a := range res.Anomalies {
				if shown[a.Kind]++; shown[a.Kind] <= 20 {
					fmt.Fprintf(out, "%s %s-%d offset %d value %q: %s\n", a.Kind, a.Topic, a.Partition, a.Offset, a.Value, a.Detail)
				}
			}
			fmt.Fprintln(out, verdict)
			if res.Count() > 0 {
				return errChaosFailed
			}
			return nil
		},
	}
}

// chaosRunOptions are `chaos run`'s flags, as given.
type chaosRunOptions struct {
	brokers     int
	duration    time.Duration
	interval    time.Duration
	faults      string
	seed        string
	workload    string
	dir         string
	torn        bool
	props       []string
	settle      time.Duration
	quiet       bool
	logLevel    string
	maxInFlight int
	// idempotence is --enable-idempotence; idempotenceSet whether it was given (else the
	// workload's, true by default).
	idempotence, idempotenceSet bool
	rate                        int
	writers                     int
	readers                     int
	topics                      int
	partitions                  int
	recordSize                  int
}

func chaosRunCmd() *cobra.Command {
	var o chaosRunOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a cluster of sluice serve processes under faults, then check the history",
		Long: `Start --brokers broker processes of this binary on this host, every client and inter-broker
connection passing through a fault proxy; run writers (unique values, acks=all, retries on) and
readers (every partition, tailing, and full passes from the start) on RF 3 topics with
min.insync.replicas=2; inject a fault every --interval for --duration on a schedule that --seed
replays; heal everything, let the cluster settle, read every partition fully from its leader,
stop the brokers and compare every replica's log below the high watermark; then check the whole
history for lost writes, duplicates, inconsistent offsets, non-monotonic sends, unexpected
values, consumer skips and backward jumps, and replica divergence. Beside them, three consumers
of one group (chaos-group) commit after processing and are crashed and restarted now and then:
every acknowledged record the group committed past was delivered to it, no consumer began a
partition past the group's committed offset or below it (redeliveries of what a crashed
consumer had not committed are counted, not anomalies), and commits never went back.

Faults (--faults, comma-separated kinds or groups):
  kill       kill-leader, kill-follower, kill-controller, kill-random, kill-majority (kill -9, restart)
  process    bounce (SIGTERM: controlled shutdown within 30 s), pause (SIGSTOP of a leader past
             the broker session timeout, then SIGCONT: a zombie leader)
  partition  isolate (a leader cut from the brokers and the clients), split (majority/minority),
             one-way (bytes dropped one way between a leader and a follower), delay (50-250 ms)
  disk       power-loss (a power cut: bytes not fsynced are lost, the last page maybe torn),
             damage (a killed broker's files: truncated segment tail, flipped bits, a zeroed
             page, a deleted index, all where its recovery reads again), disk-full (ENOSPC
             for the hold)
  admin      reassign (a random partition moved, under load, to a random set of
             min.insync.replicas to replication-factor brokers in a random order; the heal
             moves a shrunk one back up to the replication factor, a move in progress runs on)
  all        every kind (the default)
  bitrot     (by name only) bits flipped in log bytes a killed broker's recovery point vouches
             for: nothing repairs such a replica yet, so a run with it reports divergence

The run's directory (--dir) gets history.jsonl (every send, read and fault), summary.json,
checks/ (every anomaly by kind, the outages), timeline.html (throughput and latency over time
with the faults drawn on them) and cluster/ (the brokers' data, properties and logs). The last
line is the verdict; the exit status is 1 when any anomaly or harness failure was found.
Ctrl-C stops every process it started and keeps the history written so far.

A --workload file is JSON with any of: topics, partitions, replication_factor,
min_insync_replicas, writers, rate, record_size, max_in_flight, readers, reread_interval,
delivery_timeout, group_consumers (3; 0 turns them off), group_assignor (cooperative-sticky,
range or roundrobin), group_crash_interval (15s: the mean time between two crashes of one group
consumer) (durations as "30s").`,
		Args: noArgs(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.idempotenceSet = cmd.Flags().Changed("enable-idempotence")
			ro, err := o.resolve()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ro.Progress = cmd.OutOrStdout()
			if o.quiet {
				ro.Progress = nil
			}
			s, err := chaos.Run(ctx, ro)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted: every process the run started is stopped; the history so far is in %s", filepath.Join(ro.Dir, "history.jsonl"))
				}
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.Verdict)
			fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", filepath.Join(ro.Dir, "timeline.html"))
			if !s.Passed {
				return errChaosFailed
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.brokers, "brokers", 3, "broker processes (each a controller voter too)")
	f.DurationVar(&o.duration, "duration", 5*time.Minute, "how long faults are injected")
	f.DurationVar(&o.interval, "interval", 5*time.Second, "time between the starts of two faults")
	f.StringVar(&o.faults, "faults", "all", "fault kinds and groups, comma-separated (see above)")
	f.StringVar(&o.seed, "seed", "1", "the seed of the schedule and of the targets' choice (an unsigned integer)")
	f.StringVar(&o.workload, "workload", "", "a workload file (JSON, see above); flags below win over it")
	f.StringVar(&o.dir, "dir", "", "the run's directory (default chaos-<seed>-<time>)")
	f.BoolVar(&o.torn, "torn", true, "power cuts may keep part of the unsynced appends with the last page torn")
	f.StringArrayVar(&o.props, "property", nil, "a server property `key=value` for every broker (repeatable)")
	f.DurationVar(&o.settle, "settle", 5*time.Second, "how long the workload runs on after the last heal")
	f.BoolVar(&o.quiet, "quiet", false, "print only the verdict")
	f.StringVar(&o.logLevel, "log-level", "info", "the brokers' log level")
	f.BoolVar(&o.idempotence, "enable-idempotence", true, "idempotent writers: the run is then held to no duplicates and to each writer's order")
	f.IntVar(&o.maxInFlight, "max-in-flight", 0, "each writer's requests in flight per broker (0: the workload's; 5 with idempotence, else 1, which promises order)")
	f.IntVar(&o.rate, "rate", 0, "records per second over all writers (0: the workload's; 400 by default)")
	f.IntVar(&o.writers, "writers", 0, "writers, each its own producer (0: the workload's; 4 by default)")
	f.IntVar(&o.readers, "readers", 0, "readers of every partition (0: the workload's; 2 by default)")
	f.IntVar(&o.topics, "topics", 0, "topics (0: the workload's; 2 by default)")
	f.IntVar(&o.partitions, "partitions", 0, "partitions per topic (0: the workload's; 4 by default)")
	f.IntVar(&o.recordSize, "record-size", 0, "bytes per record value (0: the workload's; 100 by default)")
	return cmd
}

// errChaosFailed is the exit of a run that found anomalies; the verdict said which.
var errChaosFailed = errors.New("chaos: the run found anomalies (see the verdict and the report)")

// resolve checks every flag before any process starts and returns the run's options.
func (o chaosRunOptions) resolve() (chaos.Options, error) {
	var ro chaos.Options
	if runtime.GOOS != "linux" {
		return ro, chaos.ErrNotLinux
	}
	seed, err := strconv.ParseUint(o.seed, 10, 64)
	if err != nil {
		return ro, fmt.Errorf("--seed %q: want an unsigned integer", o.seed)
	}
	kinds, err := chaos.ParseFaults(o.faults)
	if err != nil {
		return ro, err
	}
	if o.brokers < 1 || o.brokers > 9 {
		return ro, fmt.Errorf("--brokers %d: want 1 to 9", o.brokers)
	}
	if o.interval < time.Second {
		return ro, fmt.Errorf("--interval %v: want at least 1s", o.interval)
	}
	if o.duration < o.interval {
		return ro, fmt.Errorf("--duration %v: want at least one --interval (%v)", o.duration, o.interval)
	}
	if err := checkServerProperties(o.props); err != nil {
		return ro, err
	}
	var w chaos.Workload
	if o.workload != "" {
		b, err := os.ReadFile(o.workload)
		if err != nil {
			return ro, fmt.Errorf("--workload: %w", err)
		}
		if w, err = chaos.ParseWorkload(b); err != nil {
			return ro, fmt.Errorf("--workload %s: %w", o.workload, err)
		}
	}
	for _, fl := range []struct {
		name string
		v    int
		dst  *int
	}{
		{"max-in-flight", o.maxInFlight, &w.MaxInFlight}, {"rate", o.rate, &w.Rate}, {"writers", o.writers, &w.Writers},
		{"readers", o.readers, &w.Readers}, {"topics", o.topics, &w.Topics}, {"partitions", o.partitions, &w.Partitions},
		{"record-size", o.recordSize, &w.RecordSize},
	} {
		if fl.v < 0 {
			return ro, fmt.Errorf("--%s %d: want a positive number (0: the workload's)", fl.name, fl.v)
		}
		if fl.v > 0 {
			*fl.dst = fl.v
		}
	}
	if o.idempotenceSet {
		w.Idempotence = &o.idempotence
	}
	if _, err := w.WithDefaults(o.brokers, o.duration); err != nil {
		return ro, err
	}
	exe, err := os.Executable()
	if err != nil {
		return ro, fmt.Errorf("finding this binary to run its serve: %w", err)
	}
	dir := o.dir
	if dir == "" {
		dir = fmt.Sprintf("chaos-%d-%s", seed, time.Now().UTC().Format("20060102T150405"))
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return ro, err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return ro, fmt.Errorf("--dir %s: not empty (a run needs a directory of its own)", dir)
	}
	return chaos.Options{
		Exe: exe, Dir: dir, Brokers: o.brokers, Duration: o.duration, Interval: o.interval,
		Faults: kinds, Seed: seed, Workload: w, Torn: o.torn, Properties: o.props, Settle: o.settle,
		Command: "sluice " + strings.Join(os.Args[1:], " "), Version: buildVersion(),
	}, nil
}

// buildVersion is the module version and commit, as `sluice version` prints them, on one line.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "sluice (no build information)"
	}
	var b bytes.Buffer
	writeVersion(&b, bi)
	return strings.Join(strings.Fields(strings.ReplaceAll(b.String(), "\n", "; ")), " ")
}
