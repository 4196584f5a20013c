package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// The whole chain behind the guard words: a ProduceShared request that the broker reads only
// after the producer gave up on it (here a proxy holds it past request.timeout.ms), retried the
// batch elsewhere and reused its buffer for later records, is refused, so every record is in
// the log exactly once. Without the guard the held request would append whichever later batch
// then filled the buffer, a second time.
func TestStaleProduceSharedIsRefused(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	createTopic(t, dial(t, b.Addr().String()), "stale", 1)
	// The producer reaches the broker at the unix path the broker advertises, so the proxy
	// takes that path and the broker's socket moves aside.
	advertised := b.UnixAddr().String()
	moved := filepath.Join(t.TempDir(), "broker.sock")
	if err := os.Rename(advertised, moved); err != nil {
		t.Fatal(err)
	}
	hp := newHoldingProxy(t, advertised, moved)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const batchSize = 4096
	cfg := client.ProducerConfig{
		Config: client.Config{
			// Only the held request waits out request.timeout.ms; it also bounds the bootstrap
			// and every other request, and a second timeout would retry a batch the broker
			// may have appended (a duplicate): long enough for a slow machine.
			Brokers: []string{"unix://" + hp.path}, RequestTimeout: 2 * time.Second,
			SharedMemoryBytes: 2 * (64 + batchSize), // two buffers: reused at once
			Logger:            slog.New(slog.DiscardHandler),
		},
		BatchSize: batchSize, MaxInFlight: 1, DeliveryTimeout: 20 * time.Second,
	}
	// A bootstrap that timed out (its metadata request, on a loaded machine) is tried again:
	// it is not what the test is about.
	var p *client.Producer
	var err error
	for range 5 {
		p, err = client.NewProducer(ctx, cfg)
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	send := func(i int) {
		t.Helper()
		errc := make(chan error, 1)
		p.Send(ctx, &client.Record{Topic: "stale", Value: fmt.Appendf(nil, "record-%03d", i)}, func(_ client.RecordMetadata, err error) { errc <- err })
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	send(0) // held by the proxy, timed out, retried on a new connection
	select {
	case <-hp.held:
	default:
		t.Fatal("the proxy held no ProduceShared request")
	}
	const n = 20
	for i := 1; i < n; i++ {
		send(i) // the two buffers, record 0's included, go round several times
	}
	if st := p.Stats(); st.SharedRequests < n-1 {
		t.Fatalf("%d of %d requests in shared memory: the buffers did not come back", st.SharedRequests, st.Requests)
	}
	answered := hp.release() // the held request reaches the broker now
	if answered {
		t.Fatal("the broker answered a request whose buffer had been reused")
	}

	c := dial(t, "unix://"+b.UnixAddr().String())
	awaitCommitted(t, c, "stale", 0, n-1) // acks=1: answered before the fsync that commits them
	got := fetchedValues(t, fetchP(t, c, "stale", 0, 0, 0, 1).Records)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("record-%03d", i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("log holds %q,\nwant %q", got, want)
	}
}

// holdingProxy forwards a unix socket to the broker's, descriptors included, but holds the
// first ProduceShared request it sees, and everything after it on that connection, until
// release.
type holdingProxy struct {
	t       *testing.T
	path    string
	holding atomic.Bool   // set by the connection that holds a request
	held    chan struct{} // closed once a request is held
	release func() (answered bool)
}

func newHoldingProxy(t *testing.T, path, brokerPath string) *holdingProxy {
	hp := &holdingProxy{t: t, path: path, held: make(chan struct{})}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: hp.path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	releases := make(chan func() bool, 1)
	hp.release = func() bool {
		select {
		case r := <-releases:
			return r()
		case <-time.After(10 * time.Second):
			t.Fatal("nothing to release")
			return false
		}
	}
	go func() {
		for {
			nc, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			up, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: brokerPath, Net: "unix"})
			if err != nil {
				nc.Close()
				return
			}
			go hp.forward(nc, up, releases)
		}
	}()
	return hp
}

// forward copies responses back, and requests (frame by frame, with the descriptors that came
// with them) to the broker; it keeps the proxy's first ProduceShared frame (on whichever
// connection: a bootstrap tried again leaves its first connection unused) and hands release a
// function that sends it once the client has gone, and reports whether the broker answered it.
func (hp *holdingProxy) forward(nc, up *net.UnixConn, releases chan<- func() bool) {
	responses := make(chan struct{})
	go func() { io.Copy(nc, up); close(responses) }()
	var pending []byte // bytes read, not yet forwarded
	var oob []byte     // descriptors read, not yet forwarded
	buf := make([]byte, 64<<10)
	oobBuf := make([]byte, 256)
	for {
		for len(pending) >= 4 {
			size := int(pending[0])<<24 | int(pending[1])<<16 | int(pending[2])<<8 | int(pending[3])
			if len(pending) < 4+size {
				break
			}
			frame := pending[:4+size]
			if key := wire.APIKey(int16(frame[4])<<8 | int16(frame[5])); key == wire.ProduceShared && hp.holding.CompareAndSwap(false, true) {
				held := slices.Clone(frame)
				closeRights(oob) // the held frame goes without them
				close(hp.held)
				releases <- func() bool {
					io.Copy(io.Discard, nc) // the client gives up and closes
					nc.Close()
					up.SetReadDeadline(time.Now()) // stop copying responses to the client
					<-responses
					up.SetDeadline(time.Now().Add(5 * time.Second))
					if _, err := up.Write(held); err != nil {
						return false
					}
					var size [4]byte
					_, err := io.ReadFull(up, size[:])
					up.Close()
					return !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && err == nil
				}
				return
			}
			_, _, err := up.WriteMsgUnix(frame, oob, nil)
			closeRights(oob) // the broker has its own copies now
			oob = nil
			if err != nil {
				nc.Close()
				up.Close()
				return
			}
			pending = pending[4+size:]
		}
		n, oobn, _, _, err := nc.ReadMsgUnix(buf, oobBuf)
		if err != nil {
			closeRights(oob)
			nc.Close()
			up.Close()
			return
		}
		pending = append(pending, buf[:n]...)
		oob = append(oob, oobBuf[:oobn]...)
	}
}

// closeRights closes the descriptors that control messages read by ReadMsgUnix put in this
// process (SCM_RIGHTS): forwarding a message passes copies, so the proxy's own must be closed.
// Left open, they are the test process's descriptors of the producer's region for good, and a
// later test that counts the region's descriptors (TestProduceSharedLandsInTheLog, run again
// by -count) finds them.
func closeRights(oob []byte) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for i := range msgs {
		fds, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
	}
}
