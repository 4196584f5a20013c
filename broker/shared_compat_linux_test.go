package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
	"golang.org/x/sys/unix"
)

func produceErr(ctx context.Context, c *client.Conn, topic, value string, recs []byte) error {
	var resp wire.ProduceResponse
	err := c.Call(ctx, &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
		{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: recs}}},
	}}, &resp)
	if err == nil && resp.Topics[0].Partitions[0].ErrorCode != wire.NoError {
		err = resp.Topics[0].Partitions[0].ErrorCode
	}
	if err != nil {
		return fmt.Errorf("produce %q: %w", value, err)
	}
	return nil
}

// A second AttachSharedMemory whose context is done before the answer: the broker has dropped
// the old region, and the client must not name a span of it again (it once did, and the broker
// read that span from the new region).
func TestReattachAbandonedLeavesNoStaleRegion(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c, region := attachedConn(t, b, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	createTopic(t, c, "shm-re", 1)
	if err := produceErr(ctx, c, "shm-re", "before", placed(region, 0, records(t, "before"))); err != nil {
		t.Fatal(err)
	}
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	canceled := false
	other := newRegion(t, 1<<20)
	for range 20 { // the answer may win the select; try again until the context does
		if err := c.AttachSharedMemory(done, other); errors.Is(err, context.Canceled) {
			canceled = true
			break
		}
	}
	if !canceled {
		t.Skip("the answer always won")
	}
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	if err := produceErr(pctx, c, "shm-re", "after", placed(region, 4096, records(t, "after"))); err != nil {
		t.Fatalf("after a re-attach whose context was done: %v", err)
	}
}

// Produce requests sent while another region is being attached must not point into the old
// one: the broker serves them after AttachMemory, when the old region is gone. The connection
// switches between two regions while four goroutines produce batches that lie in the first.
func TestReattachWhileProducing(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c, region := attachedConn(t, b, 1<<20)
	other := newRegion(t, 1<<20) // zeros: a span read from it by mistake is no Produce body
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	createTopic(t, c, "shm-cre", 1)
	recs := placed(region, 0, records(t, strings.Repeat("v", 1000)))
	stop := make(chan struct{})
	errc := make(chan error, 4)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
				err := produceErr(pctx, c, "shm-cre", fmt.Sprintf("%d/%d", g, i), recs)
				pcancel()
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	for i := range 50 {
		next := other
		if i%2 == 1 {
			next = region
		}
		if err := c.AttachSharedMemory(ctx, next); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatalf("produce during a re-attach: %v", err)
	default:
	}
}

// socket.request.max.bytes bounds a Produce request through the shared region as through the
// socket: a body 16 times over the limit closes the connection.
func TestProduceSharedBoundedByRequestMaxBytes(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.SocketRequestMaxBytes = 64 << 10
	b := startBroker(t, cfg)
	c := dial(t, "unix://"+b.UnixAddr().String())
	createTopic(t, c, "shm-max", 1, wire.ConfigEntry{Name: "max.message.bytes", Value: strPtr(fmt.Sprint(4 << 20))})
	file, mem := memfd(t, 4<<20, unix.F_SEAL_SHRINK)
	r := dialRawUnix(t, b)
	if resp := r.attach(1, int64(len(mem)), file); resp.ErrorCode != wire.NoError {
		t.Fatalf("attach: %v", resp.ErrorCode)
	}
	req := &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
		{Topic: "shm-max", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, strings.Repeat("x", 1<<20))}}},
	}}
	n := copy(mem, req.AppendTo(nil))
	r.send(2, shared(0, int32(n)), nil)
	var resp wire.ProduceResponse
	if r.recv(2, &resp) && resp.Topics[0].Partitions[0].ErrorCode == wire.NoError {
		t.Fatalf("a %d-byte Produce body through the region was appended; socket.request.max.bytes is %d", n, cfg.SocketRequestMaxBytes)
	}
}

// A producer with the default config, over a unix socket, to a broker that does not know
// AttachMemory (any Sluice broker before it closes the connection on an unknown api key): the
// client dials again, and the producer works. (The proxy passes ApiVersions on to a broker
// that lists AttachMemory, so the client tries once more before it settles for a plain
// connection; with a real old broker it would also stop asking.)
func TestProducerAgainstBrokerWithoutAttachMemory(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	createTopic(t, dial(t, b.Addr().String()), "compat", 1)
	proxy := filepath.Join(t.TempDir(), "old.sock")
	ln, err := net.Listen("unix", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go oldBrokerProxy(nc, b.UnixAddr().String())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		shm  int
	}{{"shared memory off", -1}, {"default", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := client.NewProducer(ctx, client.ProducerConfig{
				Config: client.Config{Brokers: []string{"unix://" + proxy}, SharedMemoryBytes: tc.shm, Logger: slog.New(slog.DiscardHandler)},
			})
			if err != nil {
				t.Fatalf("NewProducer against a broker without AttachMemory: %v", err)
			}
			defer p.Close(ctx)
			errc := make(chan error, 1)
			p.Send(ctx, &client.Record{Topic: "compat", Value: []byte("x")}, func(_ client.RecordMetadata, err error) { errc <- err })
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("produce after the fallback: %v", err)
			}
		})
	}
}

// oldBrokerProxy forwards frames to the broker but closes the connection on Sluice's own api
// keys, as a broker that does not know them does.
func oldBrokerProxy(nc net.Conn, brokerPath string) {
	defer nc.Close()
	up, err := net.Dial("unix", brokerPath)
	if err != nil {
		return
	}
	defer up.Close()
	go io.Copy(nc, up)
	var size [4]byte
	for {
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			return
		}
		n := int(size[0])<<24 | int(size[1])<<16 | int(size[2])<<8 | int(size[3])
		frame := make([]byte, n)
		if _, err := io.ReadFull(nc, frame); err != nil {
			return
		}
		if key := wire.APIKey(int16(frame[0])<<8 | int16(frame[1])); key >= 9000 {
			return
		}
		if _, err := up.Write(append(size[:], frame...)); err != nil {
			return
		}
	}
}
