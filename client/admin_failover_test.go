package client

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
)

// TestAdminMovesOnWhenItsBrokerStops: an Admin bootstrapped with two brokers works through
// the first; once that broker stops, a call on the dead connection fails (it is not sent
// again: its outcome is the caller's to judge) and the next call goes to the second broker.
// After Close every call fails with ErrClientClosed. (Two single-node brokers, each its own
// cluster, so that the answers tell which broker gave them.)
func TestAdminMovesOnWhenItsBrokerStops(t *testing.T) {
	first, second := brokertest.Start(t), brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range []struct {
		addr, topic string
	}{{first.Addr().String(), "on-first"}, {second.Addr().String(), "on-second"}} {
		a, err := NewAdmin(ctx, b.addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.CreateTopic(ctx, TopicSpec{Name: b.topic, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
		_ = a.Close()
	}
	a, err := NewAdminWithConfig(ctx, AdminConfig{Config: Config{Brokers: []string{first.Addr().String(), second.Addr().String()}}})
	if err != nil {
		t.Fatal(err)
	}
	names := func() ([]string, error) {
		ts, err := a.ListTopics(ctx)
		var out []string
		for _, ti := range ts {
			out = append(out, ti.Name)
		}
		return out, err
	}
	if got, err := names(); err != nil || !slices.Contains(got, "on-first") {
		t.Fatalf("topics through the first broker: %v, %v", got, err)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err := names()
		if err == nil {
			if !slices.Contains(got, "on-second") {
				t.Fatalf("topics after the first broker stopped: %v, want the second broker's", got)
			}
			break
		}
		failed++
		if failed > 1 || time.Now().After(deadline) {
			t.Fatalf("call %d after the first broker stopped: %v (one failed call at most: the next goes to the second)", failed, err)
		}
	}
	_ = a.Close()
	if _, err := a.ListTopics(ctx); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("ListTopics after Close: %v, want ErrClientClosed", err)
	}
}
