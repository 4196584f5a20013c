package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/localhost"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// replProc is one `sluice serve` process of the replication test, started by the test itself
// (so that it can kill -9 and restart it by pid), its properties laid out as `cluster local`
// lays them out.
type replProc struct {
	node *localNode
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait returned
}

// startReplProc starts node n's broker, its output appended to its log file, and stops it by pid
// when the test ends.
func startReplProc(t *testing.T, bin string, n *localNode) *replProc {
	t.Helper()
	logf, err := os.OpenFile(n.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor
	p := &replProc{node: n, cmd: exec.Command(bin, "serve", n.props, "--log-level", "info"), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	return p
}

// kill sends SIGKILL to the process, by its pid, and waits for it. Idempotent.
func (p *replProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// replPartition asks the brokers at addrs, in turn, for topic-part's metadata.
func replPartition(ctx context.Context, addrs []string, topic string, part int32) (wire.MetadataPartition, error) {
	var last error = errors.New("no broker answered")
	for _, addr := range addrs {
		pm, err := func() (wire.MetadataPartition, error) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			c, err := client.Dial(cctx, addr, "sluice-test")
			if err != nil {
				return wire.MetadataPartition{}, err
			}
			defer c.Close()
			var md wire.MetadataResponse
			if err := c.Call(cctx, &wire.MetadataRequest{Topics: []string{topic}}, &md); err != nil {
				return wire.MetadataPartition{}, err
			}
			for _, tm := range md.Topics {
				for _, p := range tm.Partitions {
					if p.Partition == part && p.Leader >= 0 {
						return p, nil
					}
				}
			}
			return wire.MetadataPartition{}, fmt.Errorf("%s: no leader of %s-%d", addr, topic, part)
		}()
		if err == nil {
			return pm, nil
		}
		last = err
	}
	return wire.MetadataPartition{}, last
}

// replHighWatermark asks the broker at addr (the partition's leader) for tp's latest offset:
// the high watermark.
func replHighWatermark(ctx context.Context, addr string, tp client.TopicPartition) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, "sluice-test")
	if err != nil {
		return -1, err
	}
	defer c.Close()
	var resp wire.ListOffsetsResponse
	if err := c.Call(ctx, &wire.ListOffsetsRequest{ReplicaID: -1, Topics: []wire.ListOffsetsRequestTopic{
		{Topic: tp.Topic, Partitions: []wire.ListOffsetsRequestPartition{{Partition: tp.Partition, CurrentLeaderEpoch: -1, Timestamp: wire.LatestTimestamp}}},
	}}, &resp); err != nil {
		return -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("ListOffsets answered %+v", resp)
	}
	pr := resp.Topics[0].Partitions[0]
	if pr.ErrorCode != wire.NoError {
		return -1, fmt.Errorf("ListOffsets: %v", pr.ErrorCode)
	}
	return pr.Offset, nil
}

// Three `sluice serve` processes, RF 3, min.insync.replicas=2, an idempotent acks=all producer
// (the client's default) with 5 requests in flight and retries, sending unique values to two
// partitions: three times the leader of partition 0 fails (after the ISR is full again) —
// killed with SIGKILL, paused with SIGSTOP past the session timeout (a zombie leader whose
// requests in flight the producer resends to its successor), killed again — another leader
// takes over, the producer goes on through it, and the failed broker comes back (restarted on
// its data, or SIGCONT). Then everything is read back from the leaders up to the high
// watermark: every acknowledged record is at the offset its acknowledgement gave (0 lost), no
// value is in the log twice (0 duplicates: the resends of batches the old leader had
// replicated were deduplicated by the new one), and each partition's values are in the order
// sent.
func TestReplicationProcessLeaderFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildSluice(t)
	nodes, err := planLocalCluster(localClusterOptions{brokers: 3, dataDir: t.TempDir(), basePort: 0})
	if err != nil {
		t.Fatal(err)
	}
	props := []string{"broker.session.timeout.ms=2000", "broker.heartbeat.interval.ms=300",
		"replica.lag.time.max.ms=3000", "replica.fetch.wait.max.ms=100", "replica.fetch.backoff.ms=100",
		"offsets.topic.num.partitions=1"}
	procs := make([]*replProc, len(nodes))
	var addrs []string
	for i, n := range nodes {
		if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(n.props, []byte(serverProperties(n, nodes, props)), 0o644); err != nil {
			t.Fatal(err)
		}
		procs[i] = startReplProc(t, bin, n)
		addrs = append(addrs, n.listen)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		var b strings.Builder
		for _, n := range nodes {
			fmt.Fprintf(&b, "\n--- node %d (%s) log ends:\n%s", n.id, n.logFile, localhost.LogTail(n.logFile, 25))
		}
		t.Fatalf(format+"%s", append(args, b.String())...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// waitUntil polls cond every 50 ms for at most d.
	waitUntil := func(d time.Duration, what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			ok, state := cond()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				fail("timed out after %v waiting for %s (%s)", d, what, state)
			}
			time.Sleep(50 * time.Millisecond) // polling, bounded by the deadline
		}
	}
	waitUntil(30*time.Second, "three brokers each listing all three", func() (bool, string) {
		for _, a := range addrs {
			ids, err := metadataBrokers(ctx, a)
			if err != nil || len(ids) != 3 {
				return false, fmt.Sprintf("%s: %v %v", a, ids, err)
			}
		}
		return true, ""
	})

	a, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: addrs}})
	if err != nil {
		fail("admin: %v", err)
	}
	defer a.Close()
	const topic, parts = "replicated", 2
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: parts, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		fail("create a topic of RF 3, min.insync.replicas=2: %v", err)
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil)) // retries are expected here
	p, err := client.NewProducer(ctx, client.ProducerConfig{
		Config: client.Config{Brokers: addrs, RequestTimeout: 3 * time.Second, MetadataMaxAge: time.Second, Logger: quiet},
		Acks:   client.AcksAll, DeliveryTimeout: 20 * time.Second, Linger: time.Millisecond, MaxBlock: 5 * time.Second,
		RetryBackoff: 50 * time.Millisecond, RetryBackoffMax: 500 * time.Millisecond,
	})
	if err != nil {
		fail("producer: %v", err)
	}
	type ack struct {
		part   int32
		offset int64
	}
	var mu sync.Mutex
	acked := map[string]ack{}
	failed := 0
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	stop := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		sem := make(chan struct{}, 32)
		var wg sync.WaitGroup
	loop:
		for i := 0; i < 200_000; i++ { // bounded; stop ends it long before
			select {
			case <-stop:
				break loop
			case <-ctx.Done():
				break loop
			case sem <- struct{}{}:
			}
			v := fmt.Sprintf("v-%06d", i)
			wg.Add(1)
			p.Send(ctx, &client.Record{Topic: topic, Partition: int32(i) % parts, PartitionSet: true, Value: []byte(v)}, func(md client.RecordMetadata, err error) {
				defer wg.Done()
				defer func() { <-sem }()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					return
				}
				acked[v] = ack{md.Partition, md.Offset}
			})
		}
		_ = p.Flush(ctx)
		wg.Wait()
		_ = p.Close(context.Background())
	}()
	stopProducer := sync.OnceFunc(func() { close(stop); <-produced })
	defer stopProducer()
	waitAcks := func(n int, d time.Duration, what string) {
		t.Helper()
		from := count()
		waitUntil(d, fmt.Sprintf("%d more acknowledgements %s", n, what), func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) >= from+n, fmt.Sprintf("%d acknowledged, %d failed", len(acked), failed)
		})
	}
	waitAcks(200, 20*time.Second, "before the first kill")

	for round := range 3 {
		// The ISR must be full again first: killing the leader of an ISR of two leaves one
		// replica, below min.insync.replicas.
		var pm wire.MetadataPartition
		waitUntil(20*time.Second, fmt.Sprintf("round %d: the ISR of %s-0 full", round, topic), func() (bool, string) {
			pm, err = replPartition(ctx, addrs, topic, 0)
			return err == nil && len(pm.ISR) == 3, fmt.Sprintf("%+v %v", pm, err)
		})
		leader := pm.Leader
		pause := round == 1
		how := "kill -9"
		if pause {
			how = "SIGSTOP"
			if err := syscall.Kill(procs[leader].cmd.Process.Pid, syscall.SIGSTOP); err != nil {
				fail("SIGSTOP %d: %v", leader, err)
			}
		} else {
			procs[leader].kill()
		}
		killed := time.Now()
		var rest []string
		for i, a := range addrs {
			if int32(i) != leader {
				rest = append(rest, a)
			}
		}
		waitUntil(20*time.Second, fmt.Sprintf("round %d: a leader of %s-0 other than the killed %d", round, topic, leader), func() (bool, string) {
			np, err := replPartition(ctx, rest, topic, 0)
			return err == nil && np.Leader != leader && np.LeaderEpoch > pm.LeaderEpoch, fmt.Sprintf("%+v %v", np, err)
		})
		waitAcks(150, 20*time.Second, fmt.Sprintf("round %d: after the %s of leader %d", round, how, leader))
		t.Logf("round %d: leader %d stopped (%s); 150 acknowledgements within %v", round, leader, how, time.Since(killed).Round(time.Millisecond))
		if pause {
			if err := syscall.Kill(procs[leader].cmd.Process.Pid, syscall.SIGCONT); err != nil {
				fail("SIGCONT %d: %v", leader, err)
			}
		} else {
			procs[leader] = startReplProc(t, bin, nodes[leader])
		}
		waitAcks(50, 20*time.Second, fmt.Sprintf("round %d: after %d came back", round, leader))
	}
	stopProducer()

	// Read every partition back up to its high watermark, once the ISR is full again (every
	// replica caught up, so that any of them could lead).
	c, err := client.NewConsumer(ctx, client.ConsumerConfig{Config: client.Config{Brokers: addrs, Logger: quiet}, AutoOffsetReset: client.OffsetResetEarliest})
	if err != nil {
		fail("consumer: %v", err)
	}
	defer c.Close(context.Background())
	var tps []client.TopicPartition
	for part := range int32(parts) {
		tps = append(tps, client.TopicPartition{Topic: topic, Partition: part})
		waitUntil(20*time.Second, fmt.Sprintf("the ISR of %s-%d full", topic, part), func() (bool, string) {
			pm, err := replPartition(ctx, addrs, topic, part)
			return err == nil && len(pm.ISR) == 3, fmt.Sprintf("%+v %v", pm, err)
		})
	}
	ends := map[client.TopicPartition]int64{}
	for _, tp := range tps {
		pm, err := replPartition(ctx, addrs, topic, tp.Partition)
		if err != nil {
			fail("the leader of %v: %v", tp, err)
		}
		if ends[tp], err = replHighWatermark(ctx, nodes[pm.Leader].listen, tp); err != nil {
			fail("the high watermark of %v on its leader %d: %v", tp, pm.Leader, err)
		}
	}
	if err := c.Assign(tps); err != nil {
		fail("assign: %v", err)
	}
	logs := map[client.TopicPartition]map[int64]string{}
	for _, tp := range tps {
		logs[tp] = map[int64]string{}
	}
	next := map[client.TopicPartition]int64{}
	for {
		done := true
		for _, tp := range tps {
			if next[tp] < ends[tp] {
				done = false
			}
		}
		if done {
			break
		}
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		recs, err := c.Poll(pctx)
		pcancel()
		if err != nil {
			fail("reading back (at %v of %v): %v", next, ends, err)
		}
		for _, r := range recs {
			tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			logs[tp][r.Offset] = string(r.Value)
			next[tp] = max(next[tp], r.Offset+1)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	lost, dups, total, reordered := 0, 0, 0, 0
	var examples, dupExamples []string
	for _, tp := range tps {
		seen := map[string]int64{}
		offs := make([]int64, 0, len(logs[tp]))
		for off := range logs[tp] {
			offs = append(offs, off)
		}
		slices.Sort(offs)
		last := ""
		for _, off := range offs {
			v := logs[tp][off]
			total++
			if first, ok := seen[v]; ok {
				dups++
				if len(dupExamples) < 10 {
					dupExamples = append(dupExamples, fmt.Sprintf("%q at %s-%d offsets %d and %d", v, topic, tp.Partition, first, off))
				}
				continue
			}
			seen[v] = off
			if v < last { // the values are v-<6 digits>: their order is the order sent
				reordered++
			}
			last = max(last, v)
		}
	}
	for v, a := range acked {
		if got := logs[client.TopicPartition{Topic: topic, Partition: a.part}][a.offset]; got != v {
			lost++
			if len(examples) < 10 {
				examples = append(examples, fmt.Sprintf("%q at %s-%d offset %d (the log has %q)", v, topic, a.part, a.offset, got))
			}
		}
	}
	slices.Sort(examples)
	t.Logf("%d records read back below the high watermarks %v, %d acknowledged (%d sends failed), %d duplicates, %d out of order, %d acknowledged lost",
		total, ends, len(acked), failed, dups, reordered, lost)
	if lost > 0 {
		fail("%d acknowledged records lost: %s", lost, strings.Join(examples, "; "))
	}
	if dups > 0 {
		fail("%d duplicates from an idempotent producer: %s", dups, strings.Join(dupExamples, "; "))
	}
	if reordered > 0 {
		fail("%d values out of the order sent, from an idempotent producer", reordered)
	}

	// Every replica holds the same batches below the high watermark: with the ISR full when
	// it was read, each replica's log reaches it. Compared on the logs themselves, the
	// brokers stopped (SIGTERM, by pid: a clean stop).
	for _, pr := range procs {
		_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, pr := range procs {
		select {
		case <-pr.done:
		case <-time.After(20 * time.Second):
			pr.kill()
		}
	}
	for _, tp := range tps {
		hw := batch.Offset(ends[tp])
		var want []batch.Batch
		for i, n := range nodes {
			l, err := segment.Open(filepath.Join(n.dataDir, fmt.Sprintf("%s-%d", topic, tp.Partition)), segment.Options{})
			if err != nil {
				fail("node %d's log of %s-%d: %v", i, topic, tp.Partition, err)
			}
			got, err := brokertest.LogBatches(l, hw)
			_ = l.Close()
			if err != nil {
				fail("node %d's log of %s-%d up to the high watermark %d: %v", i, topic, tp.Partition, hw, err)
			}
			if i == 0 {
				want = got
				continue
			}
			if len(got) != len(want) {
				fail("%s-%d: node %d has %d batches below the high watermark %d, node 0 has %d", topic, tp.Partition, i, len(got), hw, len(want))
			}
			for k := range got {
				if g, w := got[k], want[k]; !bytes.Equal(g, w) {
					fail("%s-%d batch %d differs: node %d has base %d epoch %d crc %08x, node 0 base %d epoch %d crc %08x",
						topic, tp.Partition, k, i, g.BaseOffset(), g.PartitionLeaderEpoch(), g.CRC(), w.BaseOffset(), w.PartitionLeaderEpoch(), w.CRC())
				}
			}
		}
		t.Logf("%s-%d: the three replicas hold the same %d batches below the high watermark %d", topic, tp.Partition, len(want), hw)
	}
}
