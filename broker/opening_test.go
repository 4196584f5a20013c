package broker

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// openGate holds every log open of one topic's partitions (at its directory listing) until
// released, counting how many wait at once.
type openGate struct {
	topic   string
	release chan struct{}

	mu      sync.Mutex
	waiting int
	most    int
}

func (g *openGate) inject(op vfs.Op, path string) error {
	if op != vfs.OpReadDir || !strings.HasPrefix(filepath.Base(path), g.topic+"-") {
		return nil
	}
	g.mu.Lock()
	g.waiting++
	g.most = max(g.most, g.waiting)
	g.mu.Unlock()
	<-g.release
	g.mu.Lock()
	g.waiting--
	g.mu.Unlock()
	return nil
}

func (g *openGate) mostAtOnce() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// TestRestartServesMetadataWhileLogsOpen: a restart answers Metadata before every partition's
// log is open, opens the logs several at a time, and answers a request to a partition still
// opening with NOT_LEADER_OR_FOLLOWER (retriable: clients refresh their metadata and try again,
// as for a partition Kafka does not host yet) until its log is open; then it is served. The
// slow file system is a gate on the logs' directory listing.
func TestRestartServesMetadataWhileLogsOpen(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	b := startBroker(t, cfg)
	createTopic(t, dial(t, b.Addr().String()), "slow", 6)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	gate := &openGate{topic: "slow", release: make(chan struct{})}
	released := sync.OnceFunc(func() { close(gate.release) })
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: gate.inject}
	b2, err := Open(cfg) // not startBroker, which waits for the logs
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b2.Close(context.Background()) })
	t.Cleanup(released) // runs first: the broker's Close waits for the opens
	c := dial(t, b2.Addr().String())

	var md wire.MetadataResponse
	call(t, c, &wire.MetadataRequest{Topics: []string{"slow"}}, &md)
	if len(md.Topics) != 1 || md.Topics[0].ErrorCode != wire.NoError || len(md.Topics[0].Partitions) != 6 {
		t.Fatalf("metadata while the logs open: %+v", md.Topics)
	}
	listOffsets := func() wire.ErrorCode {
		var lo wire.ListOffsetsResponse
		call(t, c, &wire.ListOffsetsRequest{ReplicaID: wire.ConsumerReplicaID, Topics: []wire.ListOffsetsRequestTopic{{
			Topic: "slow", Partitions: []wire.ListOffsetsRequestPartition{{Partition: 3, CurrentLeaderEpoch: -1, Timestamp: wire.LatestTimestamp}},
		}}}, &lo)
		return lo.Topics[0].Partitions[0].ErrorCode
	}
	if code := listOffsets(); code != wire.ErrNotLeaderOrFollower {
		t.Fatalf("ListOffsets of a partition still opening: %v, want NOT_LEADER_OR_FOLLOWER", code)
	}
	var pr wire.ProduceResponse
	call(t, c, &wire.ProduceRequest{Acks: 1, TimeoutMs: 1000, Topics: []wire.ProduceRequestTopic{{
		Topic: "slow", Partitions: []wire.ProduceRequestPartition{{Partition: 3, Records: records(t, "v")}},
	}}}, &pr)
	if code := pr.Topics[0].Partitions[0].ErrorCode; code != wire.ErrNotLeaderOrFollower {
		t.Fatalf("Produce to a partition still opening: %v, want NOT_LEADER_OR_FOLLOWER", code)
	}
	waitUntil(t, "several logs opening at once", func() bool { return gate.mostAtOnce() >= 2 })

	select {
	case <-b2.PartitionsOpen():
		t.Fatal("PartitionsOpen closed while logs were still opening")
	default:
	}
	released()
	<-b2.PartitionsOpen()
	if code := listOffsets(); code != wire.NoError {
		t.Fatalf("ListOffsets once the logs are open: %v", code)
	}
	if n := gate.mostAtOnce(); n > partitionOpenWorkers {
		t.Fatalf("%d logs opened at once, more than %d workers", n, partitionOpenWorkers)
	}
}
