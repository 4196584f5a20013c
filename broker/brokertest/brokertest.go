// Package brokertest starts in-process brokers for the tests of other packages (client,
// cmd/sluice): TCP on an ephemeral loopback port, a unix socket in the test's own directory, one
// consumer-offsets partition so start-up is quick, and logs discarded. It is for tests only.
package brokertest

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/sluicemq/sluice/broker"
)

// Config is a test broker's configuration with data in dir, listening on listen
// ("127.0.0.1:0" for an ephemeral port; a fixed address to restart on the same one).
func Config(dir, listen string) broker.Config {
	return broker.Config{
		DataDir:                dir,
		Listen:                 listen,
		UnixPath:               filepath.Join(dir, "b.sock"),
		OffsetsTopicPartitions: 1,
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// Open starts a broker with cfg, waits for its partitions' logs to open (broker.PartitionsOpen),
// and closes it when the test ends (a test that closes it earlier, to restart it, may: Close
// is then a no-op error that is ignored).
func Open(tb testing.TB, cfg broker.Config) *broker.Broker {
	tb.Helper()
	b, err := broker.Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = b.Close(context.Background()) })
	<-b.PartitionsOpen()
	return b
}

// Start starts a broker on an ephemeral port with data in a fresh temporary directory.
func Start(tb testing.TB) *broker.Broker {
	tb.Helper()
	return Open(tb, Config(tb.TempDir(), "127.0.0.1:0"))
}
