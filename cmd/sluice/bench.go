package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/bench"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/report"
)

// externalDrivers are the peer drivers for --driver NAME against a running system at --broker
// (registered from bench_peers.go: "kafka", "nats").
var externalDrivers = map[string]func(ctx context.Context, addr string) (bench.Driver, error){}

// embeddedPeers are the peers that --driver NAME --embedded and `bench compare` start
// in-process on a fresh data directory (registered from bench_peers.go: "kfake", "jetstream").
var embeddedPeers = map[string]func(ctx context.Context, dataDir string) (bench.Driver, error){}

// benchOptions are the flags of every `sluice bench` subcommand that runs a workload.
type benchOptions struct {
	broker        string
	embedded      bool
	brokerProcess bool
	transport     string
	driver        string
	dataDir       string
	brokerConfig  string
	json          bool
	runs          int
	pause         time.Duration
	schedSlice    time.Duration
	cpuProf       string
	traceFile     string
	memProf       string
	report        string
	// limits probes the machine's limits that bound each run right before it (--limits),
	// each probe limitsDuration long.
	limits         bool
	limitsDuration time.Duration
	// mode is the kind of run the command makes (bench.ModeProduce, …), for --limits.
	mode string

	topic       string
	partitions  int
	records     int64
	duration    time.Duration
	warmup      time.Duration
	recordSize  int
	payload     string
	payloadFile string
	producers   int
	rate        float64
	rateOfMax   float64
	probe       time.Duration
	acks        string
	compression string
	batchSize   int
	lingerMs    int
	sharedMem   bool
	// idempotence is --enable-idempotence, idempotenceSet whether it was given (else the
	// client's default: on with --acks all, off with 1 or 0).
	idempotence, idempotenceSet bool
	fileReads                   bool
	group                       string
	idleTimeout                 time.Duration
	fetchSize                   int

	// cluster is the cluster of broker processes the run starts (--brokers; none at 0).
	cluster benchClusterOptions
}

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark Sluice (or a peer) and the machine it runs on",
		Long: `Benchmark runs: produce, consume and e2e (kafka-producer-perf-test, kafka-consumer-perf-test
and EndToEndLatency in one tool), workload files (run), the machine's limits, and compare, which
runs one workload against Sluice over TCP and over its unix socket and against every peer that
can be started in-process.

--embedded starts a broker in this process on a temporary data directory (removed afterwards)
and --transport says how the client reaches it; otherwise --broker names a running one.
--driver selects the system under test: sluice (the default) or a registered peer.
--brokers N starts a cluster of N broker processes instead (cluster local's nodes, on free
ports, a fresh one for each of --runs), with the run's topics created at --replication-factor
and --min-insync-replicas; the clients bootstrap from every broker, the report names the
cluster's shape, and the CPU and peak RSS are every broker process's (summed, and each).

With --rate a run is open-loop: records are due at fixed intervals and latency is measured
from when each was due, so stalls are not hidden (no coordinated omission); how late the
harness itself sent is reported too (send lag, included in the latency). A run of --rate
that falls behind stops sending at its duration plus a grace (5 s, or a tenth of the duration
if longer), reports the records due that were never sent ("fell behind" in the summary,
unsent in the JSON) and exits non-zero; a run of --records N at --rate R lasts N/R. Progress goes to
stderr each second; with --json one JSON object goes to stdout at the end and the summary to
stderr. MB/s is 10^6 bytes/s; the limits' gbps figures are GB/s (10^9 bytes/s).`,
	}
	cmd.AddCommand(benchProduceCmd(), benchConsumeCmd(), benchE2ECmd(), benchRunCmd(), benchCompareCmd(), benchLimitsCmd(), benchFailoverCmd())
	return cmd
}

// addConnFlags adds the flags that say which system to run against.
func addConnFlags(cmd *cobra.Command, o *benchOptions) {
	f := cmd.Flags()
	f.StringVar(&o.broker, "broker", defaultBroker, "broker address: host:port or unix:///path/to.sock")
	f.BoolVar(&o.embedded, "embedded", false, "start an in-process broker on a temporary data directory")
	f.StringVar(&o.transport, "transport", bench.TransportTCP, "with --embedded: tcp or unix (against a running broker, give --broker unix:///path/to.sock for its unix socket)")
	f.BoolVar(&o.brokerProcess, "broker-process", false, "with --embedded: run the broker as a child process (this binary's serve) instead of in-process, as an application and its broker on one host; its CPU time counts in the run's and is reported apart (broker_cpu_seconds)")
	f.StringVar(&o.driver, "driver", "sluice", "system under test: sluice or a registered peer ("+strings.Join(peerNames(), ", ")+")")
	f.StringVar(&o.dataDir, "data-dir", "", "with --embedded: where to make the temporary data directory (default: the system's temporary directory)")
	addBrokerConfigFlag(cmd, o)
	f.BoolVar(&o.json, "json", false, "print one JSON object on stdout at the end (the summary goes to stderr)")
	f.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the whole process (client and any embedded broker) to this file; with --broker-process the broker's goes to this file + .broker")
	f.StringVar(&o.traceFile, "trace", "", "write a Go execution trace of the run to this file (go tool trace: scheduling, GC and syscall stalls behind latency)")
	f.StringVar(&o.memProf, "memprofile", "", "write a profile of the process's allocations during the run to this file (go tool pprof -sample_index=alloc_space: what makes garbage, and so GC pauses)")
	f.StringVar(&o.report, "report", "", "write an HTML report (summary, throughput and latency over time) to this file")
	f.IntVar(&o.runs, "runs", 1, "run this many times (each on a fresh broker with --embedded) and report the medians with their spread")
	f.DurationVar(&o.pause, "pause", 5*time.Second, "with --runs, and after each probe of --rate-of-max: sync dirty pages to disk and wait this long between runs")
	addSchedSliceFlag(cmd, &o.schedSlice, "the harness's (and with --broker-process the broker's)")
	addLimitsFlags(cmd, o)
	addClusterFlags(cmd, o)
}

// addBrokerConfigFlag adds --broker-config.
func addBrokerConfigFlag(cmd *cobra.Command, o *benchOptions) {
	cmd.Flags().StringVar(&o.brokerConfig, "broker-config", "", "with --embedded (Sluice): a Kafka-style properties file for the broker, as serve --config takes (log.writeback.bytes, message.max.bytes, ...); the data directory and listeners stay the harness's")
}

// brokerConfigure returns what --broker-config asks of an embedded broker (nothing without it).
func (o *benchOptions) brokerConfigure() []func(*broker.Config) error {
	if o.brokerConfig == "" {
		return nil
	}
	return []func(*broker.Config) error{bench.BrokerProperties(o.brokerConfig)}
}

// addLimitsFlags adds --limits and --limits-duration.
func addLimitsFlags(cmd *cobra.Command, o *benchOptions) {
	f := cmd.Flags()
	f.BoolVar(&o.limits, "limits", false, "before each run, probe the machine's limits that bound it (as bench limits does: produce, the transport's stream and the disk write, with fdatasync for acks=all; consume, sendfile over the transport), sync and pause, and report the run's throughput against each; with --rate-of-max (e2e needs it: a set rate is bounded by nothing), the probed maximum's against produce's limits instead; the disk probes write in --data-dir; a --cpuprofile includes them")
	f.DurationVar(&o.limitsDuration, "limits-duration", time.Second, "with --limits: time bound of each probe")
}

// clientTransport is how the run's client reaches the system: the Sluice driver over
// --transport when embedded, unix for a unix:// --broker, else TCP (the embedded peers'
// clients included).
func (o *benchOptions) clientTransport() string {
	switch {
	case o.embedded && o.driver == "sluice":
		return o.transport
	case !o.embedded && strings.HasPrefix(o.broker, "unix://"):
		return bench.TransportUnix
	}
	return bench.TransportTCP
}

// boundingProbes are the limits probes that bound the run (none without --limits).
func (o *benchOptions) boundingProbes() ([]string, error) {
	if !o.limits {
		return nil, nil
	}
	acks, err := bench.ParseAcks(o.acks)
	if err != nil {
		return nil, err
	}
	probes := bench.BoundingProbes(o.mode, o.clientTransport(), acks)
	if o.rateOfMax > 0 {
		probes = bench.MaxBoundingProbes(o.mode, o.clientTransport(), acks) // the maximum's
	}
	if len(probes) == 0 {
		return nil, fmt.Errorf("--limits: no limit bounds a %s run at a set rate (with --rate-of-max, the maximum's are probed)", o.mode)
	}
	return probes, nil
}

// probeLimits runs probes and then settles (sync, --pause), so that the run does not meet the
// probes' dirty pages nor get the pages they freed a moment before (on the test VM, pages
// freed a moment ago are reused many times faster than pages the host has taken back).
func probeLimits(ctx context.Context, o *benchOptions, probes []string, stderr io.Writer) (bench.LimitsResult, error) {
	titles := make([]string, len(probes))
	for i, p := range probes {
		titles[i] = bench.ProbeTitle(p)
	}
	fmt.Fprintf(stderr, "probing the limits that bound the run: %s\n", strings.Join(titles, ", "))
	l, err := bench.LimitsOf(ctx, bench.LimitsConfig{Dir: o.dataDir, Duration: o.limitsDuration}, probes...)
	if err != nil {
		return l, err
	}
	for _, p := range probes {
		fmt.Fprintf(stderr, "  %-25s%6.2f GB/s\n", bench.ProbeTitle(p), l.Get(p))
	}
	return l, settle(ctx, o.pause)
}

// addRunFlags adds the flags that describe a run.
func addRunFlags(cmd *cobra.Command, o *benchOptions) {
	f := cmd.Flags()
	f.StringVar(&o.topic, "topic", "bench", "topic (created if missing)")
	f.IntVar(&o.partitions, "partitions", 1, "partitions of the topic when it is created")
	f.Int64Var(&o.records, "records", 0, "measured records, at least 1 (default: run for --duration)")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "measured time, when --records is not given")
	f.DurationVar(&o.warmup, "warmup", 0, "warm-up before the measurement (its records are not counted)")
	f.IntVar(&o.recordSize, "record-size", 1024, "record value size in bytes")
	f.StringVar(&o.payload, "payload", bench.PayloadRandom, "payload: random, text (JSON-like log lines) or file (with --payload-file)")
	f.StringVar(&o.payloadFile, "payload-file", "", "values are cut from this file's bytes (implies --payload file)")
	f.IntVar(&o.producers, "producers", 1, "producers (each with its own client)")
	f.Float64Var(&o.rate, "rate", 0, "records/s for all producers together, open-loop (default: flat out)")
	f.Float64Var(&o.rateOfMax, "rate-of-max", 0, "instead of --rate: this fraction (0 to 1] of the maximum rate, which probes of the same run find first (0.5: half the maximum; e2e searches for the highest open-loop rate sustained)")
	f.DurationVar(&o.probe, "probe", 0, "with --rate-of-max: how long each probe measures (after --warmup); default the run's --duration (the maximum is a rate held for as long as the run lasts), or 3s for a run of --records")
	f.StringVar(&o.acks, "acks", "1", "acks: all (-1), 1 or 0")
	f.StringVar(&o.compression, "compression", "none", "compression.type: none, gzip, snappy, lz4 or zstd")
	f.IntVar(&o.batchSize, "batch-size", 16384, "batch.size in bytes")
	f.IntVar(&o.lingerMs, "linger-ms", 5, "linger.ms")
	f.BoolVar(&o.idempotence, "enable-idempotence", true, "Sluice producers' enable.idempotence (not given: the client's default, on with --acks all, off with 1 or 0; true with --acks 1 or 0 is an error)")
	f.BoolVar(&o.sharedMem, "shared-memory", true, "Sluice producers over the unix socket hand their requests over in a shared-memory region, as the client does by default (false: through the socket)")
}

// checkFlags refuses the flags a run would otherwise ignore or silently replace by a default.
// Each subcommand that takes benchOptions runs it before anything starts (PreRunE); it checks
// only the flags the command has (run FILE has no run flags, compare no connection flags).
// Flags the user gave are told from defaults with Changed.
func (o *benchOptions) checkFlags(cmd *cobra.Command, _ []string) error {
	if err := o.checkClusterFlags(cmd); err != nil {
		return err
	}
	f := cmd.Flags()
	has := func(name string) bool { return f.Lookup(name) != nil }
	given := f.Changed
	o.idempotenceSet = has("enable-idempotence") && given("enable-idempotence")
	switch {
	case given("transport") && !o.embedded:
		return errors.New("--transport needs --embedded: against a running broker the transport is --broker's (--broker unix:///path/to.sock for its unix socket)")
	case o.embedded && given("broker"):
		return errors.New("--embedded starts its own broker: --broker cannot be given with it")
	case given("limits-duration") && !o.limits:
		return errors.New("--limits-duration needs --limits")
	case has("limits-duration") && o.limitsDuration <= 0:
		return fmt.Errorf("--limits-duration %v: must be positive", o.limitsDuration)
	case given("records") && given("duration"):
		return errors.New("--records and --duration cannot be used together: one bounds the run by count, the other by time")
	case given("records") && o.records <= 0:
		// Left to the run, 0 would mean no count (a produce run of the default --duration),
		// which is what leaving the flag out says.
		return fmt.Errorf("--records %d: want at least 1 record, or leave it out to %s", o.records, o.withoutRecords(cmd))
	case has("record-size") && o.recordSize <= 0:
		return fmt.Errorf("--record-size %d: want at least 1 byte", o.recordSize)
	case has("producers") && o.producers < 1:
		return fmt.Errorf("--producers %d: want at least 1", o.producers)
	case has("partitions") && o.partitions < 1:
		return fmt.Errorf("--partitions %d: want at least 1", o.partitions)
	case given("rate-of-max") && !(o.rateOfMax > 0 && o.rateOfMax <= 1): // NaN too
		return fmt.Errorf("--rate-of-max %v: want a fraction of the maximum in (0, 1]", o.rateOfMax)
	case given("probe") && !given("rate-of-max"):
		return errors.New("--probe needs --rate-of-max (it is how long each probe of the maximum lasts)")
	case given("probe") && o.probe <= 0:
		return fmt.Errorf("--probe %v: must be positive", o.probe)
	case has("batch-size") && o.batchSize < 1:
		return fmt.Errorf("--batch-size %d: want at least 1 byte", o.batchSize)
	case has("linger-ms") && o.lingerMs < 0:
		return fmt.Errorf("--linger-ms %d: cannot be negative", o.lingerMs)
	case has("idle-timeout") && o.idleTimeout <= 0:
		return fmt.Errorf("--idle-timeout %v: must be positive", o.idleTimeout)
	case given("data-dir") && has("embedded") && !o.embedded && !o.limits:
		return errors.New("--data-dir needs --embedded or --limits (it is where the embedded broker's data goes, and where the disk probes write)")
	case given("warmup") && o.mode == bench.ModeConsume:
		return errors.New("--warmup: a consume run has no warm-up (it measures from its first records' poll)")
	case given("payload") && o.payloadFile != "" && o.payload != bench.PayloadFile:
		return fmt.Errorf("--payload %s: --payload-file makes the values the file's bytes (--payload file)", o.payload)
	case given("transport") && has("driver") && o.driver != "sluice":
		return fmt.Errorf("--transport applies to the sluice driver only; %s has its own", o.driver)
	case given("workload") && anyGiven(given, "records", "duration", "record-size", "producers", "partitions", "rate", "rate-of-max", "mode"):
		return errors.New("--workload sets the run: the run flags (--records, --duration, --record-size, --producers, --partitions, --rate, --rate-of-max, --mode) cannot be given with it")
	}
	// Only Sluice producers over the unix socket use shared memory. compare (no --transport)
	// runs Sluice over both, so there it applies to the unix run.
	if given("shared-memory") && !o.sharedMem && has("transport") && o.clientTransport() != bench.TransportUnix {
		return fmt.Errorf("--shared-memory=false: only Sluice producers over the unix socket use shared memory, and this run's transport is %s", o.clientTransport())
	}
	if given("file-reads") && !o.fileReads && has("transport") && o.clientTransport() != bench.TransportUnix {
		return fmt.Errorf("--file-reads=false: only Sluice consumers over the unix socket read the broker's files, and this run's transport is %s", o.clientTransport())
	}
	return nil
}

// withoutRecords says what the command's run does without --records: a produce or e2e run
// (compare's too, by its --mode) runs for --duration, a consume run reads every record there
// is, a consume run on a fresh broker (--embedded, compare) first fills its topic.
func (o *benchOptions) withoutRecords(cmd *cobra.Command) string {
	mode, compare := o.mode, cmd.Flags().Lookup("mode")
	if compare != nil {
		mode = compare.Value.String()
	}
	switch {
	case mode != bench.ModeConsume:
		return "run for --duration"
	case o.embedded || compare != nil:
		return fmt.Sprintf("fill the topic with %d records and read them all", bench.DefaultFillRecords)
	default:
		return "read every record there is (until none arrives for --idle-timeout)"
	}
}

// anyGiven reports whether any of the named flags was given on the command line.
func anyGiven(given func(string) bool, names ...string) bool {
	for _, n := range names {
		if given(n) {
			return true
		}
	}
	return false
}

func peerNames() []string {
	var names []string
	for n := range externalDrivers {
		names = append(names, n)
	}
	for n := range embeddedPeers {
		names = append(names, n+" (embedded)")
	}
	sort.Strings(names)
	return names
}

// config is the run the flags describe.
func (o *benchOptions) config(progress io.Writer) (bench.Config, error) {
	acks, err := bench.ParseAcks(o.acks)
	if err != nil {
		return bench.Config{}, fmt.Errorf("--acks: %w", err)
	}
	if !(o.rate >= 0) { // NaN too
		return bench.Config{}, fmt.Errorf("--rate %v: want records/s, or leave it out to run flat out", o.rate)
	}
	payload := o.payload
	if o.payloadFile != "" {
		payload = bench.PayloadFile
	}
	if o.records < 0 || o.duration <= 0 && o.records == 0 {
		return bench.Config{}, errors.New("--records cannot be negative and --duration must be positive")
	}
	return bench.Config{
		Topic: o.topic, Partitions: o.partitions, CreateTopic: true,
		Records: o.records, Duration: o.duration, Warmup: o.warmup,
		RecordSize: o.recordSize, Payload: payload, PayloadFile: o.payloadFile,
		Producers: o.producers, Rate: o.rate, RateOfMax: o.rateOfMax, ProbeDuration: o.probe, Acks: acks, AcksSet: true, Compression: o.compression,
		BatchSize: o.batchSize, LingerMs: o.lingerMs, NoSharedMemory: !o.sharedMem, Idempotence: o.idempotencePtr(), Group: o.group, IdleTimeout: o.idleTimeout, FetchBytes: o.fetchSize,
		NoFileReads: !o.fileReads, FollowerLagEvery: o.cluster.followerLag,
		Progress: progress,
		Settle:   o.settle,
	}, nil
}

func benchLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openDriver opens the system the flags name.
func openDriver(ctx context.Context, o *benchOptions, stderr io.Writer) (bench.Driver, error) {
	if o.transport != bench.TransportTCP && o.transport != bench.TransportUnix {
		return nil, fmt.Errorf("--transport %q: want tcp or unix", o.transport)
	}
	if o.brokerProcess && (!o.embedded || o.driver != "sluice") {
		return nil, errors.New("--broker-process needs --embedded and the sluice driver")
	}
	if o.brokerConfig != "" && (!o.embedded || o.driver != "sluice") {
		return nil, errors.New("--broker-config needs --embedded and the sluice driver")
	}
	if o.driver == "sluice" {
		if o.brokerProcess {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("--broker-process: %w", err)
			}
			var args []string
			if o.cpuProf != "" {
				// The broker's own profile, next to the harness's (the last run's, with --runs).
				args = append(args, "--cpuprofile", o.cpuProf+".broker")
			}
			if o.brokerConfig != "" {
				args = append(args, "--config", o.brokerConfig) // serve's flags win over it
			}
			if o.schedSlice != 0 {
				args = append(args, "--sched-slice", o.schedSlice.String())
			}
			return bench.ProcessSluice(ctx, exe, o.dataDir, o.transport, benchLogger(stderr), args...)
		}
		if o.embedded {
			return bench.EmbeddedSluice(ctx, o.dataDir, o.transport, benchLogger(stderr), o.brokerConfigure()...)
		}
		return bench.NewSluiceDriver(ctx, "sluice", o.broker, benchLogger(stderr))
	}
	if o.embedded {
		open, ok := embeddedPeers[o.driver]
		if !ok {
			return nil, fmt.Errorf("--driver %q: no such embedded peer (have: sluice %s)", o.driver, strings.Join(peerNames(), " "))
		}
		return openEmbeddedPeer(ctx, o.driver, open, o.dataDir)
	}
	open, ok := externalDrivers[o.driver]
	if !ok {
		return nil, fmt.Errorf("--driver %q: no such driver (have: sluice %s)", o.driver, strings.Join(peerNames(), " "))
	}
	return open(ctx, o.broker)
}

// openEmbeddedPeer starts a peer on a new temporary directory, removed when the driver closes.
func openEmbeddedPeer(ctx context.Context, name string, open func(context.Context, string) (bench.Driver, error), parent string) (bench.Driver, error) {
	dir, err := os.MkdirTemp(parent, "sluice-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	d, err := open(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return bench.WithClose(d, func() error { return os.RemoveAll(dir) }), nil
}

// benchRunE wraps a run: signals, the driver, and the output (JSON on stdout with --json,
// else the summary on stdout).
func benchRunE(o *benchOptions, run func(ctx context.Context, d bench.Driver, stderr io.Writer) (bench.Result, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
		if o.runs < 1 {
			return fmt.Errorf("--runs %d: want at least 1", o.runs)
		}
		probes, err := o.boundingProbes()
		if err != nil {
			return err
		}
		if err := applySchedSlice(o.schedSlice); err != nil {
			return err
		}
		stopProfile, err := startProfiles(o.cpuProf, o.traceFile, o.memProf)
		if err != nil {
			return err
		}
		var results []bench.Result
		var baseName string // the workload's name, without the run numbers
		for i := range o.runs {
			if i > 0 {
				if err = settle(ctx, o.pause); err != nil {
					break
				}
			}
			if o.runs > 1 {
				fmt.Fprintf(stderr, "== run %d of %d\n", i+1, o.runs)
			}
			var limits bench.LimitsResult
			if len(probes) > 0 {
				if limits, err = probeLimits(ctx, o, probes, stderr); err != nil {
					break
				}
			}
			var r bench.Result
			r, err = runOnce(ctx, o, stderr, run)
			if r.Driver == "" { // the run did not start
				break
			}
			r.SetBounds(limits, probes)
			if o.runs > 1 {
				baseName = r.Name
				r.Name = strings.TrimSpace(r.Name + fmt.Sprintf(" run %d", i+1))
				r.WriteSummary(stderr)
			}
			results = append(results, r)
			if err != nil || ctx.Err() != nil {
				break
			}
		}
		err = errors.Join(err, stopProfile())
		if len(results) == 0 {
			return err
		}
		err = errors.Join(err, writeReport(o.report, o.dataDir, results))
		if o.runs == 1 {
			r := results[0]
			return errors.Join(err, writeResult(o.json, stdout, stderr, r, r.WriteSummary))
		}
		sum := bench.Summarize(results)
		sum.Name = baseName
		return errors.Join(err, writeResult(o.json, stdout, stderr, sum, sum.WriteSummary))
	}
}

// settle settles the system for the next run (settle, with --pause), and after each probe of
// --rate-of-max (bench.Config.Settle).
func (o *benchOptions) settle(ctx context.Context) error { return settle(ctx, o.pause) }

// idempotencePtr is --enable-idempotence if given, else nil (the client's default).
func (o *benchOptions) idempotencePtr() *bool {
	if !o.idempotenceSet {
		return nil
	}
	on := o.idempotence
	return &on
}

// settle runs between repeated runs: it releases the process's garbage to the system
// (bench.ReleaseMemory), writes every dirty page back (sync(2)) and waits pause, so that one
// run's heap, writeback and freed memory do not fall into the next. On the
// 2-core test VM, 1 KiB produce runs back to back in one process fell from 528 k to 270 k
// records/s, while runs after a sync and a pause each gave 1.0 to 1.1 M.
func settle(ctx context.Context, pause time.Duration) error {
	bench.ReleaseMemory()
	syscall.Sync()
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runOnce opens the system the flags name (a fresh one, with --embedded), runs one workload
// against it and closes it.
func runOnce(ctx context.Context, o *benchOptions, stderr io.Writer, run func(ctx context.Context, d bench.Driver, stderr io.Writer) (bench.Result, error)) (bench.Result, error) {
	if o.cluster.brokers > 0 {
		return runOnCluster(ctx, o, stderr, run)
	}
	d, err := openDriver(ctx, o, stderr)
	if err != nil {
		return bench.Result{}, err
	}
	r, err := run(ctx, d, stderr)
	if cerr := d.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", d.Name(), cerr)
	}
	return r, err
}

// startProfiles starts a CPU profile and an execution trace, each to its file ("" for none),
// and samples every 4 KiB allocated for an allocation profile (memFile); stop ends them and
// writes the allocation profile.
func startProfiles(cpuFile, traceFile, memFile string) (stop func() error, err error) {
	var stops []func() error
	stopAll := func() error {
		var errs []error
		for _, s := range stops {
			errs = append(errs, s())
		}
		return errors.Join(errs...)
	}
	if cpuFile != "" {
		f, err := os.Create(cpuFile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		stops = append(stops, func() error { pprof.StopCPUProfile(); return f.Close() })
	}
	if traceFile != "" {
		f, err := os.Create(traceFile)
		if err != nil {
			return nil, errors.Join(err, stopAll())
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			return nil, errors.Join(err, stopAll())
		}
		stops = append(stops, func() error { trace.Stop(); return f.Close() })
	}
	if memFile != "" {
		f, err := os.Create(memFile)
		if err != nil {
			return nil, errors.Join(err, stopAll())
		}
		// Finer than the default 512 KiB, so that per-request garbage of a few hundred bytes
		// shows; it costs a little CPU per sampled allocation. The profile counts what was
		// allocated since the process started, set-up included.
		rate := runtime.MemProfileRate
		runtime.MemProfileRate = 4 << 10
		stops = append(stops, func() error {
			runtime.GC() // the profile shows allocations up to the last GC
			err := pprof.Lookup("allocs").WriteTo(f, 0)
			runtime.MemProfileRate = rate // the command may run inside a test process
			return errors.Join(err, f.Close())
		})
	}
	return stopAll, nil
}

// writeReport writes the HTML report of results to file ("" for none).
func writeReport(file, dataDir string, results []bench.Result) error {
	if file == "" {
		return nil
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if dataDir == "" {
		dataDir = os.TempDir() // where the embedded brokers make theirs
	}
	h := bench.ReportHeader{Version: buildVersion(), Machine: report.DetectMachine(dataDir)}
	err = bench.WriteHTMLReport(f, h, results)
	return errors.Join(err, f.Close())
}

// writeResult writes the summary (stderr with --json, else stdout) and the JSON object.
func writeResult(asJSON bool, stdout, stderr io.Writer, v any, summary func(io.Writer)) error {
	if !asJSON {
		summary(stdout)
		return nil
	}
	summary(stderr)
	return bench.WriteJSON(stdout, v)
}

func benchProduceCmd() *cobra.Command {
	o := benchOptions{mode: bench.ModeProduce}
	cmd := &cobra.Command{
		Use:     "produce",
		Short:   "Produce records flat out, or open-loop at --rate, and report throughput and ack latency",
		Args:    cobra.NoArgs,
		PreRunE: o.checkFlags,
		RunE: benchRunE(&o, func(ctx context.Context, d bench.Driver, stderr io.Writer) (bench.Result, error) {
			c, err := o.config(stderr)
			if err != nil {
				return bench.Result{}, err
			}
			return bench.Produce(ctx, d, c)
		}),
	}
	addConnFlags(cmd, &o)
	addRunFlags(cmd, &o)
	return cmd
}

func benchConsumeCmd() *cobra.Command {
	o := benchOptions{mode: bench.ModeConsume}
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Read --records records (or all there are) from a topic and report throughput",
		Long: `Read --records records (or, without it, everything until nothing arrives for
--idle-timeout) from every partition of --topic, from the beginning (or from --group's
committed offsets; the run then commits exactly the records it counted, so that the group's
next run starts right after them). With --embedded the fresh broker's topic is first filled
with --records records (default 100000) of --record-size bytes by a producer, reported on
stderr.`,
		Args:    cobra.NoArgs,
		PreRunE: o.checkFlags,
		RunE: benchRunE(&o, func(ctx context.Context, d bench.Driver, stderr io.Writer) (bench.Result, error) {
			c, err := o.config(stderr)
			if err != nil {
				return bench.Result{}, err
			}
			if o.embedded {
				return bench.FillAndConsume(ctx, d, c, stderr)
			}
			return bench.Consume(ctx, d, c)
		}),
	}
	addConnFlags(cmd, &o)
	addRunFlags(cmd, &o)
	cmd.Flags().Lookup("records").Usage = fmt.Sprintf("records to read, at least 1 (default: all there are; with --embedded the topic is first filled with %d)", bench.DefaultFillRecords)
	cmd.Flags().StringVar(&o.group, "group", "", "consumer group: resume from its committed offsets, and commit at the end exactly the records the run counted (with --embedded every run has a fresh broker, so nothing carries over between runs)")
	cmd.Flags().DurationVar(&o.idleTimeout, "idle-timeout", 2*time.Second, "stop (all records) or fail (--records) when nothing arrives for this long")
	addFetchFlag(cmd, &o)
	return cmd
}

func benchE2ECmd() *cobra.Command {
	o := benchOptions{mode: bench.ModeE2E}
	cmd := &cobra.Command{
		Use:   "e2e",
		Short: "Produce at --rate and consume in the same process; latency from scheduled send to receipt",
		Long: `Producers send at --rate records/s (open-loop), each value starting with its scheduled
send time; a consumer per topic in the same process measures latency from that time to the
record's receipt. --record-size must be at least 16 bytes.

An e2e run always has a rate. --rate-of-max 0.5 runs at half the maximum rate, found first
by probes of the same run on topics of their own: one flat out, which bounds it, then five
open-loop probes bisecting for the highest rate delivered within 3 % of schedule with a
median wait under 5 ms plus two lingers (each --warmup plus --probe long). The summary and the JSON (max_rate) give both rates.`,
		Args: cobra.NoArgs,
		RunE: benchRunE(&o, func(ctx context.Context, d bench.Driver, stderr io.Writer) (bench.Result, error) {
			c, err := o.config(stderr)
			if err != nil {
				return bench.Result{}, err
			}
			return bench.E2E(ctx, d, c)
		}),
	}
	addConnFlags(cmd, &o)
	addRunFlags(cmd, &o)
	rate := cmd.Flags().Lookup("rate")
	rate.DefValue, rate.Usage = "10000", "records/s for all producers together, open-loop"
	o.rate = 10000 // not Set: that would mark the flag as given
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if cmd.Flags().Changed("rate-of-max") && !cmd.Flags().Changed("rate") {
			o.rate = 0 // the default rate gives way; both given is an error
		}
		return o.checkFlags(cmd, args)
	}
	cmd.Flags().DurationVar(&o.idleTimeout, "idle-timeout", 5*time.Second, "fail when records stop arriving for this long")
	addFetchFlag(cmd, &o)
	return cmd
}

// addFetchFlag adds --fetch-size to commands that consume.
func addFetchFlag(cmd *cobra.Command, o *benchOptions) {
	cmd.Flags().IntVar(&o.fetchSize, "fetch-size", 0, "bytes one fetch may bring per partition (max.partition.fetch.bytes; Sluice and Kafka drivers, the JetStream driver refuses it); default Kafka's 1 MiB")
	cmd.Flags().BoolVar(&o.fileReads, "file-reads", true, "Sluice consumers over the unix socket read large ranges of records from the broker's segment files, as the client does by default (false: every record through the socket)")
}

func benchRunCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:     "run FILE",
		Short:   "Run a workload file (YAML, as in bench/workloads/)",
		Args:    cobra.ExactArgs(1),
		PreRunE: o.checkFlags,
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := bench.LoadWorkload(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), w)
			c, err := w.Config()
			if err != nil {
				return err
			}
			o.mode, o.acks = w.Mode(), strconv.Itoa(c.Acks) // for --limits
			if c.RateOfMax > 0 {
				o.rateOfMax = c.RateOfMax
			}
			return benchRunE(&o, func(ctx context.Context, d bench.Driver, stderr io.Writer) (bench.Result, error) {
				return bench.RunWorkload(ctx, d, w, stderr, o.settle)
			})(cmd, nil)
		},
	}
	addConnFlags(cmd, &o)
	return cmd
}

// compareSystems are Sluice embedded over TCP and over unix, then every embedded peer.
func compareSystems(dataDir string, stderr io.Writer, configure ...func(*broker.Config) error) []bench.System {
	systems := []bench.System{}
	for _, t := range []string{bench.TransportTCP, bench.TransportUnix} {
		systems = append(systems, bench.System{Name: "sluice-" + t, Transport: t, Open: func(ctx context.Context) (bench.Driver, error) {
			return bench.EmbeddedSluice(ctx, dataDir, t, benchLogger(stderr), configure...)
		}})
	}
	names := make([]string, 0, len(embeddedPeers))
	for n := range embeddedPeers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		open := embeddedPeers[n]
		systems = append(systems, bench.System{Name: n, Open: func(ctx context.Context) (bench.Driver, error) {
			return openEmbeddedPeer(ctx, n, open, dataDir)
		}})
	}
	return systems
}

func benchCompareCmd() *cobra.Command {
	var (
		o        benchOptions
		workload string
		mode     string
	)
	cmd := &cobra.Command{
		Use:   "compare [--workload FILE | run flags]",
		Short: "Run one workload against Sluice (TCP and unix) and every in-process peer; print ratios",
		Long: `Run the same workload, one system after another, against Sluice embedded over TCP and over
its unix socket and against every peer that can be started in-process, then print each one's
records/s, MB/s, p99 latency and its ratio to Sluice over TCP. The workload is --workload FILE,
or the run flags: a produce run, an e2e run with --mode e2e, or with --mode consume a consume
run, each system's topic first filled with --records records (default 100000) by a producer.`,
		Args:    cobra.NoArgs,
		PreRunE: o.checkFlags,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			var run func(ctx context.Context, d bench.Driver) (bench.Result, error)
			acks, rateOfMax := 1, 0.0 // the run's, for --limits
			if workload != "" {
				w, err := bench.LoadWorkload(workload)
				if err != nil {
					return err
				}
				fmt.Fprintln(stderr, w)
				c, err := w.Config()
				if err != nil {
					return err
				}
				mode, acks, rateOfMax = w.Mode(), c.Acks, c.RateOfMax
				run = func(ctx context.Context, d bench.Driver) (bench.Result, error) {
					return bench.RunWorkload(ctx, d, w, stderr, o.settle)
				}
			} else {
				c, err := o.config(stderr)
				if err != nil {
					return err
				}
				acks, rateOfMax = c.Acks, c.RateOfMax
				switch mode {
				case bench.ModeProduce:
					run = func(ctx context.Context, d bench.Driver) (bench.Result, error) { return bench.Produce(ctx, d, c) }
				case bench.ModeE2E:
					run = func(ctx context.Context, d bench.Driver) (bench.Result, error) { return bench.E2E(ctx, d, c) }
				case bench.ModeConsume:
					if err := c.CheckConsume(); err != nil {
						return err
					}
					run = func(ctx context.Context, d bench.Driver) (bench.Result, error) {
						return bench.FillAndConsume(ctx, d, c, stderr)
					}
				default:
					return fmt.Errorf("--mode %q: want produce, consume or e2e", mode)
				}
			}
			if o.runs < 1 {
				return fmt.Errorf("--runs %d: want at least 1", o.runs)
			}
			systems := compareSystems(o.dataDir, stderr, o.brokerConfigure()...)
			// With --limits, each comparison is preceded by every probe that bounds one of
			// its systems (the peers' clients use TCP), and each row is measured against its
			// own system's.
			probesOf := map[string][]string{}
			var probes []string
			if o.limits {
				for _, sys := range systems {
					probesOf[sys.Name] = bench.BoundingProbes(mode, sys.Transport, acks)
					if rateOfMax > 0 {
						probesOf[sys.Name] = bench.MaxBoundingProbes(mode, sys.Transport, acks)
					}
					for _, p := range probesOf[sys.Name] {
						if !slices.Contains(probes, p) {
							probes = append(probes, p)
						}
					}
				}
				if len(probes) == 0 {
					return fmt.Errorf("--limits: no limit bounds a %s run at a set rate (with --rate-of-max, the maximum's are probed)", mode)
				}
			}
			var all [][]bench.CompareRow
			for i := range o.runs {
				if i > 0 && settle(ctx, o.pause) != nil {
					break
				}
				if o.runs > 1 {
					fmt.Fprintf(stderr, "=== compare run %d of %d\n", i+1, o.runs)
				}
				var limits bench.LimitsResult
				if len(probes) > 0 {
					var err error
					if limits, err = probeLimits(ctx, &o, probes, stderr); err != nil {
						if len(all) == 0 {
							return err
						}
						break
					}
				}
				// Run i starts with system i (round the list), so that over --runs no
				// system always runs first or after the same other one.
				rows := bench.CompareFrom(ctx, systems, i, run, stderr)
				for k := range rows {
					if rows[k].Error == "" {
						rows[k].Result.SetBounds(limits, probesOf[rows[k].System])
					}
				}
				if o.runs > 1 {
					bench.WriteCompareTable(stderr, rows)
				}
				all = append(all, rows)
				if ctx.Err() != nil {
					break
				}
			}
			rows := all[0]
			out := map[string]any{"results": rows}
			if o.runs > 1 {
				rows = bench.SummarizeCompare(all)
				out = map[string]any{"results": rows, "runs": all}
				fmt.Fprintf(stderr, "=== medians of %d runs (each ratio from its own run)\n", len(all))
			}
			var failed []string
			for _, r := range rows {
				if r.Error != "" {
					failed = append(failed, r.System)
				}
			}
			var results []bench.Result // the report draws the last run: medians have no timeline
			for _, r := range all[len(all)-1] {
				if r.Error == "" {
					results = append(results, r.Result)
				}
			}
			err := writeReport(o.report, o.dataDir, results)
			err = errors.Join(err, writeResult(o.json, stdout, stderr, out, func(w io.Writer) { bench.WriteCompareTable(w, rows) }))
			if len(failed) > 0 {
				err = errors.Join(err, fmt.Errorf("failed: %s", strings.Join(failed, ", ")))
			}
			return errors.Join(err, ctx.Err())
		},
	}
	f := cmd.Flags()
	f.StringVar(&workload, "workload", "", "workload file (default: the run flags)")
	f.StringVar(&mode, "mode", bench.ModeProduce, "without --workload: produce, consume or e2e")
	f.StringVar(&o.dataDir, "data-dir", "", "where to make the systems' temporary data directories")
	addBrokerConfigFlag(cmd, &o)
	f.BoolVar(&o.json, "json", false, "print one JSON object on stdout at the end (the table goes to stderr)")
	f.StringVar(&o.report, "report", "", "write an HTML report (summary table, throughput and latency over time of every system) to this file")
	f.IntVar(&o.runs, "runs", 1, "run the whole comparison this many times, each starting with the next system, and report each system's medians (the report draws the last run)")
	f.DurationVar(&o.pause, "pause", 5*time.Second, "with --runs: sync dirty pages to disk and wait this long between comparisons")
	addLimitsFlags(cmd, &o)
	addRunFlags(cmd, &o)
	addFetchFlag(cmd, &o) // for --mode e2e and consume
	return cmd
}

func benchLimitsCmd() *cobra.Command {
	var (
		c      bench.LimitsConfig
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Probe the machine: loopback TCP and unix streams, sendfile over each, disk write and fdatasync, CRC-32C",
		Long: `Probe what the machine can do, in this process, each probe bounded by --probe-duration and
--max-bytes: loopback TCP and unix stream throughput, a page-cached file sent with sendfile(2)
over TCP and over a unix socket (4 MiB send buffer, as the broker sets), sequential writes, and
writes with fdatasync every 1 MiB in --dir (give the broker's data directory: the disk probes
measure its filesystem), and one core's CRC-32C over data in no cache (the check every batch
gets on its way in and out). Figures are GB/s (10^9 bytes/s).`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			// bench.Limits would replace these by its defaults.
			switch {
			case c.Duration <= 0:
				return fmt.Errorf("--probe-duration %v: must be positive", c.Duration)
			case c.MaxBytes <= 0:
				return fmt.Errorf("--max-bytes %d: must be positive", c.MaxBytes)
			case c.FileSize <= 0:
				return fmt.Errorf("--file-size %d: must be positive", c.FileSize)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if c.Dir == "" {
				if fi, err := os.Stat("data"); err == nil && fi.IsDir() {
					c.Dir = "data"
				}
			}
			r, err := bench.Limits(ctx, c)
			if err != nil {
				return err
			}
			return writeResult(asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr(), r, r.WriteSummary)
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Dir, "dir", "", "directory for the disk probes (default ./data if it exists, else the system's temporary directory)")
	f.DurationVar(&c.Duration, "probe-duration", time.Second, "time bound of each probe")
	f.Int64Var(&c.MaxBytes, "max-bytes", 4<<30, "byte bound of each socket probe (a quarter of it for the disk probes)")
	f.Int64Var(&c.FileSize, "file-size", 64<<20, "size of the page-cached file the sendfile probes send")
	f.BoolVar(&asJSON, "json", false, "print one JSON object on stdout (the summary goes to stderr)")
	return cmd
}
