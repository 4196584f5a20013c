package brokertest

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/cluster"
)

// ClusterConfigs are the configurations of n combined broker+controller nodes (ids 0..n-1)
// forming one cluster over loopback, with data in fresh temporary directories, TCP only, and
// quick failure detection (controller heartbeats every 100 ms, a broker fenced after 1 s). The
// controller ports are picked free a moment before the brokers take them: the quorum's voters
// must be known up front.
func ClusterConfigs(tb testing.TB, n int) []broker.Config {
	tb.Helper()
	var voters []cluster.Voter
	var probes []net.Listener
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		probes = append(probes, ln)
		voters = append(voters, cluster.Voter{ID: int32(i), Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port})
	}
	for _, ln := range probes {
		_ = ln.Close()
	}
	cfgs := make([]broker.Config, n)
	for i := range n {
		cfg := Config(tb.TempDir(), "127.0.0.1:0")
		cfg.UnixPath = "-"
		cfg.NodeID, cfg.NodeIDSet = int32(i), true
		cfg.Voters = voters
		cfg.ControllerListen = net.JoinHostPort("127.0.0.1", strconv.Itoa(voters[i].Port))
		cfg.HeartbeatInterval, cfg.SessionTimeout = 100*time.Millisecond, time.Second
		cfgs[i] = cfg
	}
	return cfgs
}

// OpenCluster starts a broker for each of cfgs at once (a node waits for the quorum), waits
// for their partitions' logs to open, and closes them when the test ends (a test may close one
// earlier).
func OpenCluster(tb testing.TB, cfgs []broker.Config) []*broker.Broker {
	tb.Helper()
	bs := make([]*broker.Broker, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bs[i], errs[i] = broker.Open(cfgs[i])
		}()
	}
	wg.Wait()
	for _, b := range bs {
		if b != nil {
			tb.Cleanup(func() { _ = b.Close(context.Background()) })
		}
	}
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("broker %d: %v", i, err)
		}
	}
	for _, b := range bs {
		<-b.PartitionsOpen()
	}
	return bs
}
