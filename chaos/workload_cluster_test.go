package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
)

// testCluster starts three combined broker+controller nodes in this process over loopback,
// and returns their client addresses and data directories. The controller ports are picked
// free a moment before the brokers take them (the quorum's voters must be known up front).
func testCluster(t *testing.T, tweak func(*broker.Config)) ([]*broker.Broker, []broker.Config, []string, map[int32]string) {
	t.Helper()
	var voters []cluster.Voter
	var ctrl []string
	var probes []net.Listener
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		probes = append(probes, ln)
		port := ln.Addr().(*net.TCPAddr).Port
		voters = append(voters, cluster.Voter{ID: int32(i), Host: "127.0.0.1", Port: port})
		ctrl = append(ctrl, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	for _, ln := range probes {
		_ = ln.Close()
	}
	brokers := make([]*broker.Broker, 3)
	cfgs := make([]broker.Config, 3)
	errs := make([]error, 3)
	dirs := map[int32]string{}
	var wg sync.WaitGroup
	for i := range 3 {
		dir := t.TempDir()
		dirs[int32(i)] = dir
		cfg := broker.Config{
			NodeID: int32(i), NodeIDSet: true, Voters: voters, ControllerListen: ctrl[i],
			DataDir: dir, Listen: "127.0.0.1:0", UnixPath: "-",
			HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second,
			OffsetsTopicPartitions: 1, DisableControlledShutdown: true,
			BallastBytes: -1, ScrubBytesPerSec: -1,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		if tweak != nil {
			tweak(&cfg)
		}
		cfgs[i] = cfg
		wg.Add(1)
		go func() { defer wg.Done(); brokers[i], errs[i] = broker.Open(cfg) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, b := range brokers {
				if b != nil {
					_ = b.Close(context.Background())
				}
			}
			t.Fatalf("broker %d: %v", i, err)
		}
	}
	var addrs []string
	for _, b := range brokers {
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		addrs = append(addrs, b.Addr().String())
	}
	return brokers, cfgs, addrs, dirs
}

// TestWorkloadOnACluster: the whole workload against three in-process brokers, RF 3, min ISR
// 2. The topics are created with every partition led; writers, readers and three group
// consumers (crashed and restarted every few seconds) run until a few hundred values are
// acknowledged and delivered to the group, every reader has made a pass and the group has
// seen two crashes; Stop leaves every send recorded with its outcome and the group's
// committed offsets read back; the final read from the leaders covers every partition densely
// from its log start to its high watermark, holds every acknowledged value at the offset it
// was acknowledged at, and agrees with every value any reader read; the checker finds
// nothing, the group's deliveries included (every acknowledged record delivered, no gap and
// no repeat past a commit); and after the brokers stop, their replica files agree below the
// high watermark.
func TestWorkloadOnACluster(t *testing.T) {
	brokers, _, bootstrap, dirs := testCluster(t, func(c *broker.Config) { c.GroupInitialRebalanceDelay = -1 })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w, err := Workload{Topics: 2, Partitions: 2, Writers: 2, Rate: 300, Readers: 2, RecordSize: 40,
		RereadInterval: Duration(300 * time.Millisecond), DeliveryTimeout: Duration(10 * time.Second),
		GroupCrashInterval: Duration(2 * time.Second), Seed: 1}.WithDefaults(3, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := CreateTopics(ctx, bootstrap, w); err != nil {
		t.Fatal(err)
	}
	// Again: a creation retried after a lost answer finds its topics and goes on.
	if err := CreateTopics(ctx, bootstrap, w); err != nil {
		t.Fatalf("creating the topics again: %v", err)
	}
	var hist bytes.Buffer
	rec := NewRecorder(&hist, time.Now())
	ws, err := StartWorkers(ctx, bootstrap, w, rec)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s := ws.Stats(); s.Acknowledged < 300 || s.Passes < int64(2*w.Readers) || s.GroupDelivered < 300 || s.GroupCrashes < 2; s = ws.Stats() {
		if time.Now().After(deadline) {
			_ = ws.Stop(ctx)
			t.Fatalf("timed out waiting for acknowledgements, passes, deliveries and crashes: %+v", s)
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded by the deadline
	}
	if err := ws.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stats := ws.Stats()
	final, replicas, err := FinalReadReplicas(ctx, bootstrap, w, rec, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}

	checkHistory(t, hist.Bytes(), w, final, stats, true)
	checkGroup(t, hist.Bytes(), w, final)
	for tp := range final.HighWatermarks {
		if l := replicas.Leaders[tp]; l < 0 || l > 2 || len(replicas.ISR[tp]) < w.MinInsyncReplicas || len(replicas.Replicas[tp]) != 3 {
			t.Errorf("%v: leader %d, replicas %v, ISR %v", tp, l, replicas.Replicas[tp], replicas.ISR[tp])
		}
	}

	// The replicas' files, once the brokers have stopped.
	var wg sync.WaitGroup
	for _, b := range brokers {
		wg.Add(1)
		go func() { defer wg.Done(); _ = b.Close(context.Background()) }()
	}
	wg.Wait()
	ds, err := CompareReplicas(dirs, w.TopicNames(), replicas, final.HighWatermarks)
	if err != nil || len(ds) != 0 {
		t.Fatalf("replicas: %+v, %v", ds, err)
	}
}

// TestWorkloadThroughABrokerCrash: a broker is stopped without controlled shutdown (as a
// crash) while the workload runs, so that its leaderships move once its session times out,
// and started again. The writers and readers carry on (they never stop before Stop),
// acknowledgements resume, and the history still holds every acknowledged value at its offset
// in the final read, every reader's reads agreeing with it; once the restarted broker is back
// in every ISR, the three replicas of every partition agree below the HW.
func TestWorkloadThroughABrokerCrash(t *testing.T) {
	brokers, cfgs, bootstrap, dirs := testCluster(t, func(c *broker.Config) { c.ReplicaLagTimeMax = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, ws, rec, hist := startSmallWorkload(ctx, t, bootstrap, 3)
	defer ws.Stop(ctx)
	waitAcks := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for s := ws.Stats(); s.Acknowledged < n; s = ws.Stats() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %d acknowledgements: %+v", n, s)
			}
			time.Sleep(20 * time.Millisecond) // polling, bounded by the deadline
		}
	}
	waitAcks(100)
	// Broker 0 leads one of the three partitions (the controller spreads them) or follows.
	if err := brokers[0].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := ws.Stats().Acknowledged
	waitAcks(before + 200)
	again, err := broker.Open(cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	brokers[0] = again
	t.Cleanup(func() { _ = again.Close(context.Background()) })
	waitAcks(ws.Stats().Acknowledged + 100)
	deadline := time.Now().Add(30 * time.Second)
	for {
		rs, err := readReplicaState(ctx, bootstrap[1:], w)
		full := err == nil
		for _, isr := range rs.ISR {
			full = full && len(isr) == 3
		}
		if full {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker 0 not back in every ISR: %+v, %v", rs, err)
		}
		time.Sleep(50 * time.Millisecond) // polling, bounded by the deadline
	}
	stopAndCompare(ctx, t, ws, brokers, bootstrap, dirs, w, rec, hist)
}

// checkGroup runs the checker over a run's history and wants no anomaly, deliveries to the
// group, and the group's committed offset of every partition read back at its end (the high
// watermark: Stop waited for the group to commit it).
func checkGroup(t *testing.T, hist []byte, w Workload, final FinalState) {
	t.Helper()
	res, err := Check(func(fn func(Event) error) error { return ReadHistory(bytes.NewReader(hist), fn) }, final, w.CheckOptions())
	if err != nil {
		t.Fatal(err)
	}
	if res.Count() != 0 {
		t.Fatalf("%s\n%+v", res.Verdict(0), res.Anomalies)
	}
	if res.GroupDelivered == 0 || res.GroupCrashes < 2 {
		t.Fatalf("%d delivered to the group, %d consumer crashes", res.GroupDelivered, res.GroupCrashes)
	}
	committed := map[TopicPartition]int64{}
	err = ReadHistory(bytes.NewReader(hist), func(e Event) error {
		if e.Type == EvCommitted && e.Group == GroupID {
			committed[TopicPartition{e.Topic, e.Partition}] = e.Offset
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for tp, hw := range final.HighWatermarks {
		if committed[tp] != hw {
			t.Errorf("%v: the group committed %d, the high watermark is %d", tp, committed[tp], hw)
		}
	}
	t.Logf("%s", res.Verdict(0))
}

// checkHistory checks a run's history by hand (the checker is another file's): every send
// recorded once with its outcome (as many as stats counted), the final read dense from each
// partition's log start to its HW, every acknowledged value there at the offset it was
// acknowledged at, and every value a reader read the final read's at that offset. wantPass
// asks for the tail's reads and a pass's.
func checkHistory(t *testing.T, hist []byte, w Workload, final FinalState, stats WorkerStats, wantPass bool) {
	t.Helper()
	type key struct {
		tp     TopicPartition
		offset int64
	}
	acked := map[key]string{}
	finalAt := map[key]string{}
	var others []Event
	sends, failed := 0, 0
	passes := map[int]int{}
	err := ReadHistory(bytes.NewReader(hist), func(e Event) error {
		tp := TopicPartition{e.Topic, e.Partition}
		switch e.Type {
		case EvSend:
			sends++
			if e.Outcome == Failed {
				failed++
				if e.Offset != -1 {
					t.Errorf("failed send %+v has an offset", e)
				}
				return nil
			}
			if e.Outcome != OK || e.Start <= 0 || e.Start > e.T {
				t.Errorf("send event %+v", e)
			}
			k := key{tp, e.Offset}
			if v, dup := acked[k]; dup {
				t.Errorf("%v acknowledged for %s and %s", k, v, Value{e.Writer, e.Seq})
			}
			acked[k] = Value{e.Writer, e.Seq}.String()
		case EvRead:
			if len(e.Offsets) != len(e.Values) || len(e.Offsets) == 0 {
				t.Errorf("read event %+v", e)
			}
			if e.Reader == FinalReader {
				for i, o := range e.Offsets {
					finalAt[key{tp, o}] = e.Values[i]
				}
			} else {
				if e.Reader < 1 || e.Reader > w.Readers {
					t.Errorf("read event of reader %d", e.Reader)
				}
				passes[e.Pass]++
				others = append(others, e)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if int64(sends) != stats.Sent || int64(sends-failed) != stats.Acknowledged || sends == 0 {
		t.Fatalf("%d send events (%d failed) for stats %+v", sends, failed, stats)
	}
	// A pass that began before the first acknowledgement read nothing: a later one did.
	if wantPass && (passes[0] == 0 || len(passes) < 2) {
		t.Fatalf("read events by pass: %v, want the tail's (0) and a pass's (1, 2, ...)", passes)
	}
	// The final read: every partition, densely, from its log start to its HW.
	if len(final.HighWatermarks) != w.Topics*w.Partitions || len(final.LogStarts) != len(final.HighWatermarks) {
		t.Fatalf("final state of %d/%d partitions", len(final.HighWatermarks), len(final.LogStarts))
	}
	total := 0
	for tp, hw := range final.HighWatermarks {
		for o := final.LogStarts[tp]; o < hw; o++ {
			if _, ok := finalAt[key{tp, o}]; !ok {
				t.Fatalf("the final read of %v lacks offset %d (log start %d, HW %d)", tp, o, final.LogStarts[tp], hw)
			}
			total++
		}
	}
	if total != len(finalAt) {
		t.Fatalf("the final read has %d records, the partitions %d", len(finalAt), total)
	}
	for k, v := range acked {
		if got, ok := finalAt[k]; !ok || got != v {
			t.Errorf("acknowledged %s at %v; the final read has %q there", v, k, got)
		}
	}
	for _, e := range others {
		for i, o := range e.Offsets {
			if got := finalAt[key{TopicPartition{e.Topic, e.Partition}, o}]; got != e.Values[i] {
				t.Errorf("reader %d pass %d read %s at %s-%d %d; the final read has %q", e.Reader, e.Pass, e.Values[i], e.Topic, e.Partition, o, got)
			}
		}
	}
}

// TestWorkloadThroughMoves: the reassignment fault's moves, made while the workload runs on
// three in-process brokers (RF 3, min ISR 2): each moves a partition to the target the fault
// chose (two or three brokers, in a new order) and completes; the heal moves a shrunk
// partition back up to three replicas. Nothing acknowledged is lost, the readers agree with
// the final read, the replicas in the final lists agree below the HW, and no broker keeps the
// data of a partition it no longer holds.
func TestWorkloadThroughMoves(t *testing.T) {
	brokers, _, bootstrap, dirs := testCluster(t, func(c *broker.Config) { c.ReplicaLagTimeMax = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w, ws, rec, hist := startSmallWorkload(ctx, t, bootstrap, 2)
	defer ws.Stop(ctx)
	// until polls cond every 20 ms for up to 30 s.
	until := func(what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok, state := cond()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %s", what, state)
			}
			time.Sleep(20 * time.Millisecond) // polling, bounded by the deadline
		}
	}
	acked := func(n int64) func() (bool, string) {
		return func() (bool, string) { s := ws.Stats(); return s.Acknowledged >= n, fmt.Sprintf("%+v", s) }
	}
	m := &mover{bootstrap: bootstrap, nodes: []int32{0, 1, 2}, topics: w.TopicNames(), rf: 3, minISR: 2}
	settled := func(tp client.TopicPartition, want []int32) func() (bool, string) {
		return func() (bool, string) {
			a, err := m.admin(ctx)
			if err != nil {
				return false, err.Error()
			}
			defer a.Close()
			current, inProgress, err := m.replicaTarget(ctx, a, tp)
			rs, rerr := readReplicaState(ctx, bootstrap, w)
			ctp := TopicPartition{tp.Topic, tp.Partition}
			state := fmt.Sprintf("replicas %v (in progress %+v, %v), ISR %v (%v)", current, inProgress, err, rs.ISR[ctp], rerr)
			done := err == nil && rerr == nil && inProgress == nil && len(rs.ISR[ctp]) == len(current)
			return done && (want == nil || slices.Equal(current, want)) && (want != nil || len(current) == 3), state
		}
	}
	until("acknowledgements", acked(100))
	shrunk := 0
	for i := range 4 {
		rng := rand.New(rand.NewPCG(7, uint64(i)))
		mv, err := m.start(ctx, rng)
		if err != nil || mv.refused {
			t.Fatalf("move %d: %+v, %v", i, mv, err)
		}
		t.Logf("move %d: %s", i, mv.detail)
		until("acknowledgements during the move", acked(ws.Stats().Acknowledged+50))
		until(mv.detail, settled(mv.tp, mv.target))
		how, err := m.restore(ctx, rng, mv.tp)
		if err != nil {
			t.Fatal(err)
		}
		if len(mv.target) < 3 {
			shrunk++
			if !strings.Contains(how, "moved back up to 3 replicas") {
				t.Fatalf("heal of a move to %v: %s", mv.target, how)
			}
			until("the move back up to 3 replicas", settled(mv.tp, nil))
		} else if !strings.Contains(how, "left as it is") {
			t.Fatalf("heal of a move to %v: %s", mv.target, how)
		}
	}
	if shrunk == 0 || shrunk == 4 {
		t.Fatalf("%d of 4 moves shrank a partition: the seeds should give both kinds", shrunk)
	}
	until("acknowledgements after the moves", acked(ws.Stats().Acknowledged+100))
	stopAndCompare(ctx, t, ws, brokers, bootstrap, dirs, w, rec, hist)
}

// startSmallWorkload creates one RF 3 topic of partitions partitions and starts two writers
// and a reader on it (no group consumers), recording into the returned history.
func startSmallWorkload(ctx context.Context, t *testing.T, bootstrap []string, partitions int) (Workload, *Workers, *Recorder, *bytes.Buffer) {
	t.Helper()
	w, err := Workload{Topics: 1, Partitions: partitions, Writers: 2, Rate: 300, Readers: 1, RecordSize: 40,
		RereadInterval: Duration(time.Hour), DeliveryTimeout: Duration(15 * time.Second), GroupConsumers: new(0)}.WithDefaults(3, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := CreateTopics(ctx, bootstrap, w); err != nil {
		t.Fatal(err)
	}
	hist := new(bytes.Buffer)
	rec := NewRecorder(hist, time.Now())
	ws, err := StartWorkers(ctx, bootstrap, w, rec)
	if err != nil {
		t.Fatal(err)
	}
	return w, ws, rec, hist
}

// stopAndCompare ends a workload test: the workers stop, the final read checks the history
// (not the group's), and once the brokers have stopped every replica in its partition's final
// list agrees with the leader below the HW and no broker keeps a partition it does not hold.
func stopAndCompare(ctx context.Context, t *testing.T, ws *Workers, brokers []*broker.Broker, bootstrap []string,
	dirs map[int32]string, w Workload, rec *Recorder, hist *bytes.Buffer) {
	t.Helper()
	if err := ws.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	final, replicas, err := FinalReadReplicas(ctx, bootstrap, w, rec, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	checkHistory(t, hist.Bytes(), w, final, ws.Stats(), false)
	var wg sync.WaitGroup
	for _, b := range brokers {
		wg.Add(1)
		go func() { defer wg.Done(); _ = b.Close(context.Background()) }()
	}
	wg.Wait()
	ds, err := CompareReplicas(dirs, w.TopicNames(), replicas, final.HighWatermarks)
	if err != nil || len(ds) != 0 {
		t.Fatalf("replicas: %+v, %v", ds, err)
	}
	if stale := StaleReplicaData(dirs, w.TopicNames(), replicas); len(stale) != 0 {
		t.Fatalf("stale replica data: %q", stale)
	}
}
