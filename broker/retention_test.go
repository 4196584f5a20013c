package broker

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// retentionGate is a log handler that holds the retention pass inside its first deletion (the
// segment package logs each one) until released, and counts the deletions.
type retentionGate struct {
	mu      sync.Mutex
	deleted int
	entered chan struct{} // closed at the first deletion
	release chan struct{} // closed by the test
	once    sync.Once
}

func newRetentionGate() *retentionGate {
	return &retentionGate{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *retentionGate) Enabled(context.Context, slog.Level) bool { return true }

func (g *retentionGate) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "retention deleted segments" {
		return nil
	}
	g.mu.Lock()
	g.deleted++
	first := g.deleted == 1
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	return nil
}

func (g *retentionGate) WithAttrs([]slog.Attr) slog.Handler { return g }
func (g *retentionGate) WithGroup(string) slog.Handler      { return g }

func (g *retentionGate) open() { g.once.Do(func() { close(g.release) }) }

func (g *retentionGate) deletions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deleted
}

// Close stops a retention pass between two partitions: the partitions it has not reached wait
// for the next start, Close does not wait for them, and the retention goroutine is gone when
// Close returns. The pass is held inside its first deletion until Close has begun, with every
// partition then expired.
func TestCloseStopsTheRetentionPass(t *testing.T) {
	const partitions = 8
	cfg := testConfig(t, t.TempDir())
	cfg.RetentionCheck = 10 * time.Millisecond
	gate := newRetentionGate()
	t.Cleanup(gate.open) // a failing test must not leave the pass held
	cfg.Logger = slog.New(gate)
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", partitions, wire.ConfigEntry{Name: "retention.bytes", Value: strPtr("0")})
	for p := range int32(partitions) {
		if res := produce(t, c, "t", p, wire.AcksLeader, records(t, "gone")); res.ErrorCode != wire.NoError {
			t.Fatalf("produce to t-%d: %v", p, res.ErrorCode)
		}
	}
	select {
	case <-gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no retention pass deleted anything in 10 s")
	}

	closed := make(chan error, 1)
	go func() { closed <- b.Close(context.Background()) }()
	for deadline := time.Now().Add(10 * time.Second); b.ctx.Err() == nil; {
		if time.Now().After(deadline) {
			t.Fatal("Close did not start shutting down in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	gate.open() // the pass goes on with the broker stopping
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return in 10 s")
	}
	if n := gate.deletions(); n != 1 {
		t.Fatalf("the retention pass deleted from %d of %d expired partitions; want it stopped after the one it was in when Close began", n, partitions)
	}
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "(*Broker).retentionLoop") {
		t.Fatalf("the retention goroutine outlived Close:\n%s", stacks)
	}
}
