package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

func testConfig(dir string) Config {
	return Config{NodeID: 1, Dir: dir, Logger: slog.New(slog.DiscardHandler)}
}

func open(t *testing.T, cfg Config) *Controller {
	t.Helper()
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func populate(t *testing.T, c *Controller, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	registerAlive(t, c, BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 9092, UnixSocket: "/tmp/sluice.sock"})
	for i := range n {
		spec := TopicSpec{Name: fmt.Sprintf("%s-%d", prefix, i), NumPartitions: int32(i%4 + 1), ReplicationFactor: 1}
		if i%2 == 0 {
			spec.Configs = map[string]string{"retention.ms": fmt.Sprint(1000 * (i + 1))}
		}
		if _, err := c.CreateTopic(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AlterTopicConfigs(ctx, prefix+"-1", map[string]string{"write.caching": "true"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPartitionLeader(ctx, LeaderChange{Topic: prefix + "-1", Partition: 1, Leader: 1, LeaderEpoch: 0}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(ctx, prefix+"-0"); err != nil {
		t.Fatal(err)
	}
}

// sameState compares two metadata snapshots through their canonical
// encoding, which covers every field including the version.
func sameState(t *testing.T, got, want *Metadata) {
	t.Helper()
	if g, w := encoded(t, got), encoded(t, want); !bytes.Equal(g, w) {
		t.Fatalf("state differs after reopen:\n got %s\nwant %s", g, w)
	}
}

// TestOpenIsFastAndLeads checks that a single voter leads without raft's
// default wait. What makes Open fast is the heartbeat timeout raft runs with:
// a node campaigns after 1x to 2x of it, so raft's default (1s) alone would
// make Open take a second or more; that is checked on the running raft.
// Wall time on a shared machine is noisy (each Open does several fsyncs),
// so it is only bounded loosely, for the fastest of three.
func TestOpenIsFastAndLeads(t *testing.T) {
	var c *Controller
	fastest := time.Hour
	for range 3 {
		start := time.Now()
		c = open(t, testConfig(t.TempDir()))
		fastest = min(fastest, time.Since(start))
	}
	t.Logf("fastest Open: %v", fastest)
	if hb := c.raft.ReloadableConfig().HeartbeatTimeout; hb > 100*time.Millisecond {
		t.Errorf("raft runs with heartbeat timeout %v: a node waits up to twice that to campaign", hb)
	}
	if fastest > 5*time.Second {
		t.Errorf("Open took %v", fastest)
	}
	if c.ControllerID() != 1 {
		t.Errorf("ControllerID %d", c.ControllerID())
	}
	tp, err := c.CreateTopic(context.Background(), TopicSpec{Name: "t", NumPartitions: 1, ReplicationFactor: 1})
	if !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("create without brokers: %v, %+v", err, tp)
	}
}

func TestRestartKeepsState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, testConfig(dir))
	populate(t, c, "topic", 6)
	want := c.Metadata()
	if want.NumTopics() != 5 || want.Version() == 0 {
		t.Fatalf("%d topics, version %d", want.NumTopics(), want.Version())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = open(t, testConfig(dir))
	sameState(t, c.Metadata(), want)
}

func TestRestartFromSnapshotAndLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, testConfig(dir))
	populate(t, c, "before", 4)
	if err := c.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(); err != nil { // nothing new: still fine
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(context.Background(), TopicSpec{Name: "after", NumPartitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	want := c.Metadata()
	c.Close()
	if snaps, _ := os.ReadDir(filepath.Join(dir, "snapshots")); len(snaps) == 0 {
		t.Fatal("no snapshot on disk")
	}

	c = open(t, testConfig(dir))
	sameState(t, c.Metadata(), want)
}

func TestRestartFromSnapshotAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TrailingLogs = -1 // compact everything the snapshot covers
	c := open(t, cfg)
	populate(t, c, "t", 5)
	if err := c.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want := c.Metadata()
	c.Close()

	// The commands that built the state are gone from the log.
	store, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := store.FirstIndex()
	store.Close()
	if first != 0 && first <= want.Version() {
		t.Fatalf("log still starts at %d, at or before the state's version %d", first, want.Version())
	}

	c = open(t, cfg)
	sameState(t, c.Metadata(), want)
	// And it keeps working on top of the restored state.
	if _, err := c.CreateTopic(context.Background(), TopicSpec{Name: "more", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if c.Metadata().Version() <= want.Version() {
		t.Fatal("version did not grow after restore")
	}
}

func TestSnapshotThresholdCompactsAutomatically(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.SnapshotInterval = 20 * time.Millisecond
	cfg.SnapshotThreshold = 4
	cfg.TrailingLogs = 2
	c := open(t, cfg)
	populate(t, c, "t", 8)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if snaps, _ := os.ReadDir(filepath.Join(dir, "snapshots")); len(snaps) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no automatic snapshot")
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := c.Metadata()
	c.Close()
	c = open(t, cfg)
	sameState(t, c.Metadata(), want)
}

func TestDeleteRecreateGetsNewID(t *testing.T) {
	t.Parallel()
	c := open(t, testConfig(t.TempDir()))
	ctx := context.Background()
	registerAlive(t, c, BrokerInfo{ID: 1, Host: "h", Port: 9092})
	spec := TopicSpec{Name: "t", NumPartitions: 1, ReplicationFactor: 1}
	a, err := c.CreateTopic(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, spec); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	if err := c.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(ctx, "t"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("second delete: %v", err)
	}
	b, err := c.CreateTopic(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID || b.ID.IsZero() {
		t.Fatalf("ids %s and %s", a.ID, b.ID)
	}
}

// Rejections decided inside Apply come back through the ApplyFuture. propose
// filters most of them with a dry run, so this test submits directly.
func TestApplyErrorsThroughRaft(t *testing.T) {
	t.Parallel()
	c := open(t, testConfig(t.TempDir()))
	ctx := context.Background()
	registerAlive(t, c, BrokerInfo{ID: 1, Host: "h", Port: 9092})
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "t", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	v := c.Metadata().Version()
	cases := []struct {
		cmd  command
		want error
	}{
		{&createTopicCmd{TopicSpec: TopicSpec{Name: "t", NumPartitions: 1, ReplicationFactor: 1}, ID: NewTopicID()}, ErrTopicExists},
		{&createTopicCmd{TopicSpec: TopicSpec{Name: "u", NumPartitions: 1, ReplicationFactor: 2}, ID: NewTopicID()}, ErrInvalidReplicationFactor},
		{&alterTopicConfigsCmd{Name: "t", Set: map[string]string{"segment.bytes": "1"}}, ErrInvalidConfig},
		{&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "t", Leader: 1, LeaderEpoch: 5}}, ErrStaleLeaderEpoch},
	}
	for _, tc := range cases {
		if _, _, err := c.submit(ctx, tc.cmd); !errors.Is(err, tc.want) {
			t.Errorf("%T: %v, want %v", tc.cmd, err, tc.want)
		}
	}
	if c.Metadata().Version() != v {
		t.Error("rejected commands changed the version")
	}
}

func TestSubscribe(t *testing.T) {
	t.Parallel()
	c := open(t, testConfig(t.TempDir()))
	ch, cancel := c.Subscribe()
	ch2, _ := c.Subscribe()
	registerAlive(t, c, BrokerInfo{ID: 1, Host: "h", Port: 9092})
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
	if _, ok := c.Metadata().Broker(1); !ok {
		t.Fatal("notified before the change was visible")
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("channel open after cancel")
	}
	cancel() // idempotent
	c.Close()
	for range ch2 { // drain the pending signal; Close closes the channel
	}
	if _, ok := <-ch2; ok {
		t.Fatal("channel open after Close")
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	c := open(t, testConfig(t.TempDir()))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := c.RegisterBroker(context.Background(), BrokerInfo{ID: 1, Host: "h", Port: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if err := c.Snapshot(); !errors.Is(err, ErrClosed) {
		t.Fatalf("snapshot after Close: %v", err)
	}
	ch, _ := c.Subscribe()
	if _, ok := <-ch; ok {
		t.Fatal("subscription after Close is open")
	}
}

func TestOpenRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, testConfig(dir))

	cfg := testConfig(dir)
	cfg.LockTimeout = 50 * time.Millisecond
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("second Open of a live dir: %v", err)
	}
	c.Close()

	cfg.NodeID = 2
	// Waiting for leadership would take the whole StartupTimeout: a minute here, so that the
	// bound below tells that apart from an Open slowed by a loaded disk (it opens the raft
	// store and its fsyncs compete with the parallel tests').
	cfg.StartupTimeout = time.Minute
	start := time.Now()
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "not a voter") {
		t.Fatalf("Open with another node id: %v", err)
	}
	if d := time.Since(start); d > cfg.StartupTimeout/4 {
		t.Errorf("Open with a wrong node id took %v: it should fail fast, not wait for leadership", d)
	}
	if _, err := Open(Config{NodeID: 1}); err == nil {
		t.Fatal("Open without a dir")
	}
}

func TestConcurrentProposalsAndReads(t *testing.T) {
	t.Parallel()
	c := open(t, testConfig(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	registerAlive(t, c, BrokerInfo{ID: 1, Host: "h", Port: 9092})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 4 {
		wg.Go(func() {
			for i := range 5 {
				// Every worker also races to create one shared name: exactly one wins.
				for _, name := range []string{fmt.Sprintf("w%d-%d", w, i), "shared"} {
					_, err := c.CreateTopic(ctx, TopicSpec{Name: name, NumPartitions: 2, ReplicationFactor: 1})
					if err != nil && !(name == "shared" && errors.Is(err, ErrTopicExists)) {
						errs <- err
					}
				}
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			md := c.Metadata()
			for _, tp := range md.Topics() {
				if _, ok := md.Topic(tp.Name); !ok {
					errs <- fmt.Errorf("Topics and Topic disagree on %s", tp.Name)
					return
				}
			}
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := c.Metadata().NumTopics(); n != 21 {
		t.Fatalf("%d topics, want 21", n)
	}
}

// TestCloseLeavesNoGoroutines checks that Close waits for everything Open
// started: raft's loops, the snapshot loop, the stores. It must not run in
// parallel: parallel tests are held back until the sequential ones finish.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	dir := t.TempDir()
	for range 2 { // fresh bootstrap, then restart
		c, err := Open(testConfig(dir))
		if err != nil {
			t.Fatal(err)
		}
		populate(t, c, fmt.Sprint("g", time.Now().UnixNano()), 2)
		if err := c.Snapshot(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if leaked := leakedGoroutines(); leaked != "" {
			t.Fatalf("goroutines left after Close:\n%s", leaked)
		}
	}
}

// leakedGoroutines returns the stacks of goroutines running code from raft,
// bbolt or this package (other than the caller), after giving them time to
// finish exiting: a goroutine that has told Close it is done still has to
// return, which a loaded machine can put off. A leak stays for good.
func leakedGoroutines() string {
	var leaked []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for _, g := range strings.Split(string(buf), "\n\n")[1:] { // [0] is this goroutine
			if strings.Contains(g, "hashicorp/raft") || strings.Contains(g, "bbolt") ||
				(strings.Contains(g, "sluice/cluster.") && !strings.Contains(g, "testing.tRunner")) {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
