package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in, network, addr string
		bad               bool
	}{
		{"127.0.0.1:9092", "tcp", "127.0.0.1:9092", false},
		{"localhost:1", "tcp", "localhost:1", false},
		{"[::1]:9092", "tcp", "[::1]:9092", false},
		{"unix:///tmp/s.sock", "unix", "/tmp/s.sock", false},
		{"unix:rel.sock", "unix", "rel.sock", false},
		{"/var/run/sluice.sock", "unix", "/var/run/sluice.sock", false},
		{"./data/sluice.sock", "unix", "./data/sluice.sock", false},
		{"unix://", "", "", true},
		{"nohost", "", "", true},
	}
	for _, tc := range tests {
		n, a, err := client.ParseAddress(tc.in)
		if tc.bad {
			if !errors.Is(err, client.ErrBadAddress) {
				t.Errorf("ParseAddress(%q) = %v, want ErrBadAddress", tc.in, err)
			}
			continue
		}
		if err != nil || n != tc.network || a != tc.addr {
			t.Errorf("ParseAddress(%q) = %q, %q, %v", tc.in, n, a, err)
		}
	}
}

// startBroker runs an in-process broker for client tests.
func startBroker(t *testing.T) *broker.Broker { return brokertest.Start(t) }

func TestClientMetadataBothTransports(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, err := client.NewAdmin(ctx, b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(ctx, client.TopicSpec{Name: "meta", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{b.Addr().String(), "unix://" + b.UnixAddr().String()} {
		c, err := client.NewClient(ctx, client.Config{Brokers: []string{addr}})
		if err != nil {
			t.Fatal(err)
		}
		tm, err := c.Topic(ctx, "meta")
		if err != nil || len(tm.Partitions) != 4 {
			t.Fatalf("%s: Topic = %+v, %v", addr, tm, err)
		}
		leader, conn, err := c.Leader(ctx, "meta", 3)
		if err != nil || leader != 0 || conn == nil {
			t.Fatalf("%s: Leader = %d, %v", addr, leader, err)
		}
		if _, err := c.Topic(ctx, "missing"); !errors.Is(err, client.ErrUnknownTopic) {
			t.Fatalf("%s: unknown topic: %v", addr, err)
		}
		if _, _, err := c.Leader(ctx, "meta", 9); !errors.Is(err, client.ErrUnknownTopic) {
			t.Fatalf("%s: unknown partition: %v", addr, err)
		}
		c.Close()
	}
}

// TestTooLongFieldIsAnError: a field the protocol cannot carry (a topic name over 32,767
// bytes) is refused with an error before anything is written, and the connection goes on
// serving. It used to panic in the encoder, taking the application down.
func TestTooLongFieldIsAnError(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, addr := range []string{b.Addr().String(), "unix://" + b.UnixAddr().String()} {
		conn, err := client.Dial(ctx, addr, "test")
		if err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("t", 40000)
		var cr wire.CreateTopicsResponse
		err = conn.Call(ctx, &wire.CreateTopicsRequest{TimeoutMs: 1000, Topics: []wire.CreateTopicsRequestTopic{{Topic: long, NumPartitions: 1, ReplicationFactor: -1}}}, &cr)
		if _, ok := errors.AsType[*wire.EncodeError](err); !ok {
			t.Fatalf("%s: create with a 40,000-byte name: %v, want an EncodeError", addr, err)
		}
		var md wire.MetadataResponse
		if err := conn.Call(ctx, &wire.MetadataRequest{}, &md); err != nil || len(md.Brokers) != 1 {
			t.Fatalf("%s: the connection after the refused call: %v", addr, err)
		}
		conn.Close()

		admin, err := client.NewAdmin(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.CreateTopic(ctx, client.TopicSpec{Name: long, Partitions: 1}); err == nil {
			t.Fatalf("%s: admin created a topic with a 40,000-byte name", addr)
		}
		admin.Close()
	}
}

// A topic name the broker refuses fails a producer's Send and a consumer's Assign at once: the
// producer used to wait max.block.ms (60 s by default) for a topic that can never exist, and
// the consumer looked it up forever.
func TestInvalidTopicNameFailsAtOnce(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := client.NewProducer(ctx, client.ProducerConfig{Config: client.Config{Brokers: []string{b.Addr().String()}}, MaxBlock: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	c, err := client.NewConsumer(ctx, client.ConsumerConfig{Config: client.Config{Brokers: []string{b.Addr().String()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, name := range []string{"bad/name", "", "..", strings.Repeat("t", 250), strings.Repeat("t", 40000)} {
		start := time.Now()
		_, err := p.SendSync(ctx, &client.Record{Topic: name, Value: []byte("x")})
		if !errors.Is(err, wire.ErrInvalidTopicException) || time.Since(start) > 5*time.Second {
			t.Errorf("Send to %.20q: %v after %v, want INVALID_TOPIC_EXCEPTION at once", name, err, time.Since(start))
		}
		if err := c.Assign([]client.TopicPartition{{Topic: name}}); !errors.Is(err, wire.ErrInvalidTopicException) {
			t.Errorf("Assign %.20q: %v, want INVALID_TOPIC_EXCEPTION", name, err)
		}
	}
	// A legal name of the longest length is fine (it does not exist: Send waits for it).
	if err := c.Assign([]client.TopicPartition{{Topic: strings.Repeat("t", 249)}}); err != nil {
		t.Errorf("Assign of a 249-character name: %v", err)
	}
}
