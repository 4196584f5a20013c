package main

import (
	"context"

	"github.com/sluicemq/sluice/bench"
	"github.com/sluicemq/sluice/bench/peers"
)

// The peer drivers (franz-go, nats.go, kfake, nats-server) are registered here, in the command
// only, so that they stay out of the broker's and the client's import graphs.
func init() {
	externalDrivers["kafka"] = func(ctx context.Context, addr string) (bench.Driver, error) {
		return peers.NewKafka(ctx, addr)
	}
	externalDrivers["nats"] = func(ctx context.Context, addr string) (bench.Driver, error) {
		return peers.NewJetStream(ctx, addr)
	}
	embeddedPeers["kfake"] = func(ctx context.Context, _ string) (bench.Driver, error) {
		return peers.StartKfake(ctx) // in memory: kfake needs no data directory
	}
	embeddedPeers["jetstream"] = func(ctx context.Context, dataDir string) (bench.Driver, error) {
		return peers.StartJetStream(ctx, dataDir)
	}
}
