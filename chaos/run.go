package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/localhost"
	"github.com/sluicemq/sluice/net/wire"
)

// Options are one run's settings (`sluice chaos run`'s flags).
type Options struct {
	Exe        string        // the sluice binary the brokers run
	Dir        string        // the run's directory: history.jsonl, summary.json, timeline.html, checks/, cluster/
	Brokers    int           // 3
	Duration   time.Duration // of the fault phase: 5 min
	Interval   time.Duration // between fault starts: 5 s
	Faults     []FaultKind   // FaultKinds
	Seed       uint64
	Workload   Workload
	Torn       bool     // power cuts may tear the last page kept
	Properties []string // extra server properties for every broker
	// Settle is how long the workload runs on once every fault is healed and every partition
	// is fully in sync again, before the final read: 5 s.
	Settle   time.Duration
	Progress io.Writer // a line per fault and every 10 s; nil: none
	Command  string    // the command line, for the summary
	Version  string
}

// warmUp is how long the workload runs before the first fault.
const warmUp = 3 * time.Second

// sessionTimeout is the brokers' broker.session.timeout.ms (harnessProperties).
const sessionTimeout = 3 * time.Second

// Run runs the cluster, the workload and the faults, checks the history and writes the run's
// directory. The returned Summary says whether it passed; an error means the run could not be
// carried out (a cluster that never started, an interrupt), its history so far kept. Every
// process Run started is stopped before it returns.
func Run(ctx context.Context, o Options) (*Summary, error) {
	if o.Brokers == 0 {
		o.Brokers = 3
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.Duration <= 0 {
		o.Duration = 5 * time.Minute
	}
	if o.Settle <= 0 {
		o.Settle = 5 * time.Second
	}
	if len(o.Faults) == 0 {
		o.Faults = FaultKinds
	}
	w, err := o.Workload.WithDefaults(o.Brokers, o.Duration)
	if err != nil {
		return nil, err
	}
	w.Seed = o.Seed // the group consumers' crashes
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	r := &runner{o: o, w: w, out: o.Progress}
	if r.out == nil {
		r.out = io.Discard
	}
	return r.run(ctx)
}

// runner is one run in progress; its goroutine owns every field.
type runner struct {
	o        Options
	w        Workload
	out      io.Writer
	c        *Cluster
	rec      *Recorder
	start    time.Time
	injected []FaultRecord
	failures []string
}

func (r *runner) logf(format string, args ...any) {
	el := time.Since(r.start)
	if r.start.IsZero() {
		el = 0
	}
	fmt.Fprintf(r.out, "[%7.1fs] %s\n", el.Seconds(), fmt.Sprintf(format, args...))
}

func (r *runner) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.failures = append(r.failures, msg)
	r.logf("FAILURE: %s", msg)
	if r.rec != nil {
		r.rec.Record(Event{Type: EvInfo, Detail: "failure: " + msg})
	}
}

func (r *runner) run(ctx context.Context) (*Summary, error) {
	o := r.o
	needLayer := slices.ContainsFunc(o.Faults, FaultKind.needsFileLayer)
	r.start = time.Now()
	startedAt := r.start
	r.logf("starting %d brokers in %s", o.Brokers, filepath.Join(o.Dir, "cluster"))
	c, err := StartCluster(ctx, ClusterConfig{
		Exe: o.Exe, Dir: filepath.Join(o.Dir, "cluster"), Brokers: o.Brokers,
		Properties: o.Properties, PowerLoss: needLayer,
	}, 90*time.Second)
	if err != nil {
		return nil, err
	}
	r.c = c
	defer c.Close()
	for _, n := range c.Nodes() {
		r.logf("broker %d: pid %d, listener %s behind %s, controller %s behind %s, log %s", n.ID, c.PID(n.ID),
			n.Listen, n.Advertised, n.ControllerListen, n.AdvertisedController, n.LogFile)
	}
	if err := CreateTopics(ctx, c.Bootstrap(), r.w); err != nil {
		return nil, fmt.Errorf("chaos: creating the topics: %w", err)
	}
	cf, err := os.Create(filepath.Join(o.Dir, "clients.log"))
	if err != nil {
		return nil, err
	}
	defer cf.Close()
	r.w.Logger = slog.New(slog.NewTextHandler(cf, nil))
	hf, err := os.Create(filepath.Join(o.Dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer hf.Close()
	r.start = time.Now()
	r.rec = NewRecorder(hf, r.start)
	r.logf("topics %s ready (%d partitions each, RF %d, min.insync.replicas %d); %d writers at %d records/s, %d readers; group consumers: %s",
		strings.Join(r.w.TopicNames(), ","), r.w.Partitions, r.w.ReplicationFactor, r.w.MinInsyncReplicas, r.w.Writers, r.w.Rate, r.w.Readers, groupSetting(r.w))
	workers, err := StartWorkers(ctx, c.Bootstrap(), r.w, r.rec)
	if err != nil {
		return nil, err
	}
	stopWorkers := func() {
		if workers == nil {
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := workers.Stop(sctx); err != nil {
			r.fail("stopping the workload: %v", err)
		}
		workers = nil
	}
	defer stopWorkers()

	// A warm-up before the first fault, so that every log has records to lose, to damage and
	// to replicate when it comes.
	if err := waitUntil(ctx, time.Now().Add(warmUp)); err != nil {
		stopWorkers()
		r.interrupted(err)
		return nil, err
	}
	plan := Plan(o.Seed, o.Faults, o.Duration, o.Interval, sessionTimeout+2*time.Second)
	r.logf("%d faults planned over %v, one every %v (seed %d)", len(plan), o.Duration, o.Interval, o.Seed)
	phaseStart := time.Now()
	if err := r.faultPhase(ctx, plan, workers); err != nil {
		stopWorkers()
		r.interrupted(err)
		return nil, err
	}
	phaseTook := time.Since(phaseStart)
	r.logf("every fault healed: waiting for every partition to be fully in sync")
	if err := r.settle(ctx, 120*time.Second); err != nil {
		r.fail("the cluster did not settle after the faults: %v (the brokers' goroutine stacks are in %s)", err, strings.Join(r.c.DumpStacks(), ", "))
	}
	select {
	case <-ctx.Done():
		stopWorkers()
		r.interrupted(ctx.Err())
		return nil, ctx.Err()
	case <-time.After(o.Settle):
	}
	stopWorkers()
	r.logf("workload stopped; reading every partition from its leader")
	final, err := FinalRead(ctx, c.Bootstrap(), r.w, r.rec, 90*time.Second)
	if err != nil {
		r.fail("final read: %v", err)
	}
	md, mdErr := c.Metadata(ctx, r.w.TopicNames())
	if err := r.rec.Flush(); err != nil {
		return nil, err
	}
	if err := hf.Close(); err != nil {
		return nil, err
	}
	r.logf("stopping the brokers (SIGTERM) to compare their logs")
	for _, id := range c.Up() {
		if took, err := c.Term(id, termTimeout); err != nil {
			r.fail("final stop: %v", err)
		} else {
			r.logf("broker %d stopped in %.1f s", id, took.Seconds())
		}
	}
	if mdErr != nil {
		r.fail("metadata for the replica comparison: %v", mdErr)
	} else {
		rs := replicaStateOf(md)
		div, err := CompareReplicas(c.DataDirs(), r.w.TopicNames(), rs, final.HighWatermarks)
		if err != nil {
			r.fail("comparing replicas: %v", err)
		}
		final.Divergences = div
		for _, msg := range StaleReplicaData(c.DataDirs(), r.w.TopicNames(), rs) {
			r.fail("%s", msg)
		}
		for tp, replicas := range rs.Replicas {
			if len(replicas) < r.w.MinInsyncReplicas {
				r.fail("%s-%d ends with replicas %v, fewer than min.insync.replicas %d", tp.Topic, tp.Partition, replicas, r.w.MinInsyncReplicas)
			}
		}
	}
	// The fault phase as it ran: a fault waits for the last to be over, so it can run past
	// its plan.
	phase := max(phaseTook, time.Duration(len(plan))*o.Interval).Round(time.Second)
	if err := writeFinal(o.Dir, final, r.w.CheckOptions(), phase); err != nil {
		return nil, err
	}
	res, verdict, err := CheckDir(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("chaos: checking the history: %w", err)
	}
	elapsed := time.Since(startedAt)
	s := &Summary{
		Version: o.Version, Seed: o.Seed, Brokers: o.Brokers, Faults: kindNames(o.Faults),
		Interval: o.Interval, Duration: o.Duration, Elapsed: elapsed, Workload: r.w,
		Injected: r.injected, Result: res, Failures: r.failures, Command: o.Command, StartedAt: startedAt,
	}
	s.Passed = res.Count() == 0 && len(r.failures) == 0
	s.Verdict = verdict
	if len(r.failures) > 0 {
		s.Verdict += fmt.Sprintf("; %d harness failures (%s)", len(r.failures), r.failures[0])
	}
	if err := WriteReport(o.Dir, *s); err != nil {
		return s, fmt.Errorf("chaos: writing the report: %w", err)
	}
	return s, nil
}

func kindNames(ks []FaultKind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

// interrupted records why the run stopped early, after the workers stopped (their last
// outcomes are in the history before it), and flushes the history; the deferred stops end
// the processes.
func (r *runner) interrupted(err error) {
	r.logf("interrupted: %v; the history so far is in %s", err, filepath.Join(r.o.Dir, "history.jsonl"))
	r.rec.Record(Event{Type: EvInfo, Detail: "interrupted: " + err.Error()})
	_ = r.rec.Flush()
}

// faultPhase runs the schedule: each fault at its time (or at once, if the one before ran
// late), held, healed, then waited out: every broker back and every partition writable.
func (r *runner) faultPhase(ctx context.Context, plan []Planned, workers *Workers) error {
	in := &injector{c: r.c, topics: r.w.TopicNames(), torn: r.o.Torn, rf: r.w.ReplicationFactor, minISR: r.w.MinInsyncReplicas}
	phase := time.Now()
	lastStats := time.Now()
	for _, p := range plan {
		if err := waitUntil(ctx, phase.Add(p.At)); err != nil {
			return err
		}
		r.checkCrashed()
		rng := targetRand(r.o.Seed, p.ID)
		at := time.Since(r.start)
		t0 := r.rec.Now() // the fault begins as inject begins (a controlled shutdown takes a while)
		f, err := in.inject(ctx, p, rng)
		if err != nil {
			r.fail("fault %d (%s): %v", p.ID, p.Kind, err)
			r.restoreAll(ctx)
			continue
		}
		r.rec.Record(Event{T: t0, Type: EvFault, ID: p.ID, Fault: string(p.Kind), Targets: f.targets, Detail: f.detail})
		r.logf("fault %d %s: %s", p.ID, p.Kind, f.detail)
		for _, msg := range f.failures {
			r.fail("fault %d (%s): %s", p.ID, p.Kind, msg)
		}
		if err := waitUntil(ctx, time.Now().Add(p.Hold)); err != nil {
			how, herr := f.heal(context.Background())
			if herr != nil {
				how = "healing after the interrupt: " + herr.Error()
			}
			r.rec.Record(Event{Type: EvHeal, ID: p.ID, Fault: string(p.Kind), Targets: f.targets, Detail: how})
			r.injected = append(r.injected, FaultRecord{ID: p.ID, Kind: string(p.Kind), Targets: f.targets, Start: at, End: time.Since(r.start), Detail: f.detail})
			return err
		}
		how, err := f.heal(ctx)
		end := time.Since(r.start)
		r.rec.Record(Event{Type: EvHeal, ID: p.ID, Fault: string(p.Kind), Targets: f.targets, Detail: how})
		r.injected = append(r.injected, FaultRecord{ID: p.ID, Kind: string(p.Kind), Targets: f.targets, Start: at, End: end, Detail: f.detail})
		if err != nil {
			r.fail("healing fault %d (%s): %v", p.ID, p.Kind, err)
			r.restoreAll(ctx)
		}
		r.logf("heal %d: %s", p.ID, how)
		if err := r.c.WaitReady(ctx, 60*time.Second); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.fail("after fault %d (%s): %v", p.ID, p.Kind, err)
			r.restoreAll(ctx)
		}
		// The next fault waits until this one is over: every partition led and writable
		// (min.insync.replicas in sync), so that each outage is one fault's. A cluster that
		// does not get there within a minute of the heal has failed to recover.
		if err := r.waitWritable(ctx, time.Minute); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.fail("not writable a minute after fault %d (%s) healed: %v (the brokers' goroutine stacks are in %s)", p.ID, p.Kind, err, strings.Join(r.c.DumpStacks(), ", "))
		}
		if time.Since(lastStats) >= 10*time.Second {
			st := workers.Stats()
			r.logf("%d sent, %d acknowledged, %d failed, %d read, %d delivered to the group (%d consumer crashes)", st.Sent, st.Acknowledged, st.Failed, st.Read, st.GroupDelivered, st.GroupCrashes)
			lastStats = time.Now()
		}
	}
	return ctx.Err()
}

// checkCrashed reports brokers that exited on their own and starts them again.
func (r *runner) checkCrashed() {
	for _, id := range r.c.Crashed() {
		n := r.c.nodes[id]
		r.fail("broker %d exited on its own; its log (%s) ends:\n%s", id, n.LogFile, localhost.LogTail(n.LogFile, 10))
		if err := r.c.Start(id); err != nil {
			r.fail("restarting broker %d: %v", id, err)
		}
	}
}

// restoreAll undoes whatever a failed fault left: the network healed, paused brokers
// continued, stopped ones started, full disks emptied.
func (r *runner) restoreAll(ctx context.Context) {
	r.checkCrashed()
	r.c.Proxy.Heal()
	for _, n := range r.c.Nodes() {
		_ = os.Remove(n.JournalFile + ".disk-full")
		r.c.mu.Lock()
		st := n.state
		r.c.mu.Unlock()
		switch st {
		case paused:
			_ = r.c.Resume(n.ID)
		case stopped:
			if err := r.c.Start(n.ID); err != nil {
				r.fail("restarting broker %d: %v", n.ID, err)
			}
		}
	}
	if err := r.c.WaitReady(ctx, 60*time.Second); err != nil && ctx.Err() == nil {
		r.fail("the cluster did not come back: %v", err)
	}
}

// settle heals everything and waits until every partition has a leader and its whole
// replica set in sync.
func (r *runner) settle(ctx context.Context, timeout time.Duration) error {
	r.restoreAll(ctx)
	start := time.Now()
	deadline, report := start.Add(timeout), start.Add(10*time.Second)
	for {
		r.checkCrashed()
		md, err := r.c.Metadata(ctx, r.w.TopicNames())
		if err == nil {
			err = inSync(md)
		}
		if err == nil {
			if took := time.Since(start); took > 10*time.Second {
				r.logf("every partition in sync after %.1f s", took.Seconds())
			}
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		if time.Now().After(report) {
			// A slow settle says what it waits for: a move, a replica out of the ISR.
			r.logf("still waiting after %.0f s: %v", time.Since(start).Seconds(), err)
			report = report.Add(10 * time.Second)
		}
		if err := waitUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
			return err
		}
	}
}

// waitWritable waits until every partition has a leader and at least min.insync.replicas in
// its ISR, or timeout.
func (r *runner) waitWritable(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		md, err := r.c.Metadata(ctx, r.w.TopicNames())
		if err == nil {
			err = writable(md, r.w.MinInsyncReplicas)
		}
		if err == nil || time.Now().After(deadline) {
			return err
		}
		if err := waitUntil(ctx, time.Now().Add(100*time.Millisecond)); err != nil {
			return err
		}
	}
}

// writable is nil when every partition of md has a leader and minISR replicas in sync.
func writable(md *wire.MetadataResponse, minISR int) error {
	for _, t := range md.Topics {
		if t.ErrorCode != 0 {
			return fmt.Errorf("topic %s: error %d", t.Topic, t.ErrorCode)
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 || len(p.ISR) < minISR {
				return fmt.Errorf("%s-%d: leader %d, ISR %v", t.Topic, p.Partition, p.Leader, p.ISR)
			}
		}
	}
	return nil
}

// inSync is nil when every partition of md has a leader and every replica in its ISR.
func inSync(md *wire.MetadataResponse) error {
	for _, t := range md.Topics {
		if t.ErrorCode != 0 {
			return fmt.Errorf("topic %s: error %d", t.Topic, t.ErrorCode)
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
				return fmt.Errorf("%s-%d: leader %d, ISR %v of replicas %v", t.Topic, p.Partition, p.Leader, p.ISR, p.Replicas)
			}
		}
	}
	return nil
}

// replicaStateOf is each partition's leader, replicas and ISR.
func replicaStateOf(md *wire.MetadataResponse) ReplicaState {
	rs := ReplicaState{Leaders: map[TopicPartition]int32{}, Replicas: map[TopicPartition][]int32{}, ISR: map[TopicPartition][]int32{}}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			rs.Leaders[tp], rs.Replicas[tp], rs.ISR[tp] = p.Leader, p.Replicas, p.ISR
		}
	}
	return rs
}

// waitUntil waits for t or ctx.
func waitUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// ErrNotLinux is the error of a run elsewhere than Linux.
var ErrNotLinux = errors.New("chaos: sluice chaos needs Linux (/proc to tell brokers' connections apart, signals, the power-loss file layer)")
