package main

import (
	"context"
	"testing"
	"time"
)

// TestBenchPeersRegistered checks that the peer drivers are registered and that the embedded
// peers start and stop, and the external drivers reach them.
func TestBenchPeersRegistered(t *testing.T) {
	for _, name := range []string{"kafka", "nats"} {
		if externalDrivers[name] == nil {
			t.Errorf("externalDrivers[%q] not registered", name)
		}
	}
	for _, name := range []string{"kfake", "jetstream"} {
		if embeddedPeers[name] == nil {
			t.Errorf("embeddedPeers[%q] not registered", name)
		}
	}
	if t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for name, external := range map[string]string{"kfake": "kafka", "jetstream": "nats"} {
		d, err := embeddedPeers[name](ctx, t.TempDir())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d.Name() != name {
			t.Errorf("embedded %s: Name = %q", name, d.Name())
		}
		if err := d.CreateTopic(ctx, "t", 1); err != nil {
			t.Errorf("%s: CreateTopic: %v", name, err)
		}
		var addr string
		switch a := d.(type) {
		case interface{ Addrs() []string }:
			addr = a.Addrs()[0]
		case interface{ URL() string }:
			addr = a.URL()
		}
		e, err := externalDrivers[external](ctx, addr)
		if err != nil {
			t.Errorf("%s at %s: %v", external, addr, err)
		} else {
			if e.Name() != external {
				t.Errorf("external %s: Name = %q", external, e.Name())
			}
			e.Close()
		}
		if err := d.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
	}
}
