package broker

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/cluster"
)

// untar extracts a tar.gz fixture into dir.
func untar(t *testing.T, fixture, dir string) {
	t.Helper()
	f, err := os.Open(fixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(os.PathSeparator)) {
			t.Fatalf("fixture entry %q outside the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestLegacyDataDirOpensUnchanged: a data directory written by the single-node broker before
// the cluster work (main at 62588f8, run as node 2: testdata/legacy-62588f8.tar.gz, topic
// "legacy" with records a,b,c in partition 0 and d in 1) opens with its node id kept, its
// topics and records unchanged, and gets a meta.properties recording node and cluster.
func TestLegacyDataDirOpensUnchanged(t *testing.T) {
	root := t.TempDir()
	untar(t, filepath.Join("testdata", "legacy-62588f8.tar.gz"), root)
	dir := filepath.Join(root, "data")
	cfg := testConfig(t, dir)
	cfg.UnixPath = "-"
	b := startBroker(t, cfg)
	if b.cfg.NodeID != 2 {
		t.Fatalf("node id %d, want the recorded 2", b.cfg.NodeID)
	}
	md := b.Controller().Metadata()
	tm, ok := md.Topic("legacy")
	if !ok || len(tm.Partitions) != 2 || tm.Partitions[0].Leader != 2 {
		t.Fatalf("topic legacy: %+v %v", tm, ok)
	}
	c := dial(t, b.Addr().String())
	if got := fetchedValues(t, fetchP(t, c, "legacy", 0, 0, 0, 1).Records); strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("partition 0: %v", got)
	}
	if got := fetchedValues(t, fetchP(t, c, "legacy", 1, 0, 0, 1).Records); strings.Join(got, ",") != "d" {
		t.Fatalf("partition 1: %v", got)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	mp, ok, err := readMetaProperties(dir)
	if err != nil || !ok || !mp.hasNodeID || mp.nodeID != 2 || mp.clusterID == "" {
		t.Fatalf("meta.properties: %+v %v %v", mp, ok, err)
	}

	// The same directory under another cluster id is refused, naming both.
	if err := writeMetaProperties(dir, "AAAAAAAAAAAAAAAAAAAAAA", 2); err != nil {
		t.Fatal(err)
	}
	_, err = Open(cfg)
	if err == nil || !strings.Contains(err.Error(), "belongs to cluster AAAAAAAAAAAAAAAAAAAAAA, this cluster is "+mp.clusterID) {
		t.Fatalf("data directory of another cluster: %v", err)
	}
	// And node.id set to another id than the directory's.
	if err := writeMetaProperties(dir, mp.clusterID, 2); err != nil {
		t.Fatal(err)
	}
	cfg.NodeID, cfg.NodeIDSet = 3, true
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "belongs to node 2") {
		t.Fatalf("node.id 3 on node 2's directory: %v", err)
	}
}

// TestTwoBrokersOneDataDir: the second broker on a data directory is refused, naming it.
func TestTwoBrokersOneDataDir(t *testing.T) {
	dir := t.TempDir()
	startBroker(t, testConfig(t, dir))
	cfg := testConfig(t, dir)
	cfg.UnixPath = filepath.Join(dir, "other.sock")
	_, err := Open(cfg)
	if err == nil || !strings.Contains(err.Error(), "another broker using the data directory "+dir) {
		t.Fatalf("second broker on %s: %v", dir, err)
	}
}

// threeBrokers starts three combined broker+controller nodes in this process over loopback.
func threeBrokers(t *testing.T, tweak func(*Config)) ([]*Broker, []Config) {
	t.Helper()
	var lns []net.Listener
	var voters []cluster.Voter
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		voters = append(voters, cluster.Voter{ID: int32(i), Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port})
	}
	cfgs := make([]Config, 3)
	brokers := make([]*Broker, 3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		dir := t.TempDir()
		cfg := testConfig(t, dir)
		cfg.NodeID, cfg.NodeIDSet = int32(i), true
		cfg.Voters = voters
		cfg.ControllerListen = lns[i].Addr().String()
		ln := lns[i]
		cfg.listen = func(network, addr string) (net.Listener, error) {
			if ln != nil && addr == ln.Addr().String() {
				l := ln
				ln = nil
				return l, nil
			}
			return net.Listen(network, addr)
		}
		if tweak != nil {
			tweak(&cfg)
		}
		cfgs[i] = cfg
		wg.Add(1)
		go func() {
			defer wg.Done()
			brokers[i], errs[i] = Open(cfg)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("broker %d: %v", i, err)
		}
	}
	for _, b := range brokers {
		t.Cleanup(func() { _ = b.Close(context.Background()) })
	}
	return brokers, cfgs
}

// waitFor polls cond until it holds, for at most d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling, bounded by the deadline
	}
}

// TestThreeBrokerCluster: three brokers under one quorum; a topic created through one is known
// to all; the broker leading a partition is killed (no controlled shutdown) and its
// leaderships move once its session times out; the survivors' metadata converges. A second
// leader is stopped with controlled shutdown, which moves its leaderships before it stops.
func TestThreeBrokerCluster(t *testing.T) {
	brokers, _ := threeBrokers(t, func(c *Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.SessionTimeout = time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got := len(brokers[1].Controller().Metadata().Brokers()); got != 3 {
		t.Fatalf("%d brokers registered", got)
	}
	if _, err := brokers[1].Controller().CreateTopic(ctx, cluster.TopicSpec{Name: "t", NumPartitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	for _, b := range brokers {
		waitFor(t, 10*time.Second, "topic t everywhere", func() bool { _, ok := b.Controller().Metadata().Topic("t"); return ok })
	}
	tm, _ := brokers[0].Controller().Metadata().Topic("t")
	victim := tm.Partitions[0].Leader
	brokers[victim].cfg.DisableControlledShutdown = true // a crash: its session must time out
	if err := brokers[victim].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var survivors []*Broker
	for i, b := range brokers {
		if int32(i) != victim {
			survivors = append(survivors, b)
		}
	}
	for _, b := range survivors {
		waitFor(t, 20*time.Second, "partition 0's leadership to leave the dead broker", func() bool {
			tm, _ := b.Controller().Metadata().Topic("t")
			return tm.Partitions[0].Leader != victim && tm.Partitions[0].Leader != cluster.NoLeader
		})
	}
	waitFor(t, 10*time.Second, "the survivors' metadata to converge", func() bool {
		return survivors[0].Controller().Metadata().Version() == survivors[1].Controller().Metadata().Version()
	})
}
