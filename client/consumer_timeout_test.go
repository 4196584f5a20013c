package client_test

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
)

// freezingProxy stands at a unix socket path and forwards each connection to the broker's
// socket; connections accepted while freezeNew is set never get the broker's replies (their
// requests still reach it), as when a broker hangs. It records when each connection opened and
// when its client closed it.
type freezingProxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	freezeNew bool
	conns     []*proxiedConn
}

type proxiedConn struct {
	frozen         bool
	opened, closed time.Time // closed: when the client's side reached EOF (zero until then)
}

func newFreezingProxy(t *testing.T, path, target string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln, target: target}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			bc, err := net.Dial("unix", target)
			if err != nil {
				_ = cc.Close()
				continue
			}
			p.mu.Lock()
			pc := &proxiedConn{frozen: p.freezeNew, opened: time.Now()}
			p.conns = append(p.conns, pc)
			p.mu.Unlock()
			wg.Add(2)
			go func() { // client → broker, always
				defer wg.Done()
				_, _ = io.Copy(bc, cc)
				p.mu.Lock()
				pc.closed = time.Now()
				p.mu.Unlock()
				_ = bc.Close()
				_ = cc.Close()
			}()
			go func() { // broker → client, unless frozen
				defer wg.Done()
				if pc.frozen {
					_, _ = io.Copy(io.Discard, bc)
				} else {
					_, _ = io.Copy(cc, bc)
				}
				_ = cc.Close()
			}()
		}
	}()
	return p
}

func (p *freezingProxy) setFreezeNew(v bool) {
	p.mu.Lock()
	p.freezeNew = v
	p.mu.Unlock()
}

// snapshot returns a copy of the connections' records.
func (p *freezingProxy) snapshot() []proxiedConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]proxiedConn, len(p.conns))
	for i, c := range p.conns {
		out[i] = *c
	}
	return out
}

// A fetch that gets no answer fails after request.timeout.ms plus fetch.max.wait.ms: the
// consumer logs it as a failure (not as a seek's cancellation, which refetches silently),
// closes that connection, refetches on a new one, and delivers the records, in both
// record-lifetime modes. (The fetcher's requests share one context per connection, with a
// timer per request: a timer that stops short, or fires into the next request, would show
// here as a hang or as a connection closed too early.)
func TestConsumerFetchTimesOut(t *testing.T) {
	for _, mode := range consumerModes {
		t.Run(mode.name, func(t *testing.T) {
			f := newConsumerFixture(t)
			// The consumer reaches the broker at the unix path the broker advertises, so the
			// proxy takes that path and the broker's socket moves aside.
			advertised := f.b.UnixAddr().String()
			moved := filepath.Join(t.TempDir(), "moved.sock")
			if err := os.Rename(advertised, moved); err != nil {
				t.Fatal(err)
			}
			proxy := newFreezingProxy(t, advertised, moved)

			topic := "timeout-" + mode.name
			f.createTopic(topic, 1)
			f.produceValues(topic, 0, "a", "b", "c")
			tp := client.TopicPartition{Topic: topic}

			const requestTimeout, maxWait = 300 * time.Millisecond, 50 * time.Millisecond
			var failures atomic.Int64
			c := f.consumer(client.ConsumerConfig{
				Config:             client.Config{Brokers: []string{"unix://" + advertised}, RequestTimeout: requestTimeout, Logger: client.FetchFailureLogger(&failures)},
				FetchMaxWait:       maxWait,
				RetryBackoff:       10 * time.Millisecond,
				AutoOffsetReset:    client.OffsetResetEarliest,
				ReuseRecordBuffers: mode.reuse,
			}, tp)
			if pos, err := c.Position(f.ctx, tp); err != nil || pos != 0 {
				t.Fatalf("Position = %d, %v; want 0", pos, err)
			}
			before := len(proxy.snapshot()) // metadata and offset lookups' connection
			proxy.setFreezeNew(true)        // the fetcher's first connection hangs
			done := make(chan []client.Record, 1)
			go func() { done <- f.pollN(c, 3) }()
			for len(proxy.snapshot()) == before {
				if f.ctx.Err() != nil {
					t.Fatal("the fetcher never connected")
				}
				time.Sleep(time.Millisecond)
			}
			proxy.setFreezeNew(false)

			var got []client.Record
			select {
			case got = <-done:
			case <-f.ctx.Done():
				t.Fatal("no records after the frozen fetch: the request never timed out")
			}
			if vals := []string{string(got[0].Value), string(got[1].Value), string(got[2].Value)}; vals[0] != "a" || vals[2] != "c" {
				t.Fatalf("records %q, want a b c", vals)
			}
			conns := proxy.snapshot()[before:]
			frozen := conns[0]
			if !frozen.frozen || len(conns) < 2 {
				t.Fatalf("connections after the lookups: %+v, want the frozen fetch and a new one", conns)
			}
			if failures.Load() == 0 {
				t.Error("no fetch failure logged: the timeout was taken for a seek's cancellation")
			}
			if frozen.closed.IsZero() {
				t.Fatal("the frozen fetch's connection is still open: a request that timed out must end it")
			}
			// The timer starts before the dial the proxy sees, so the connection lives a little
			// less than request.timeout.ms + fetch.max.wait.ms; a timer fired early would cut
			// it well short of request.timeout.ms.
			if d := frozen.closed.Sub(frozen.opened); d < requestTimeout {
				t.Errorf("the frozen fetch's connection ended after %v, before request.timeout.ms (%v)", d, requestTimeout)
			}
			// The consumer goes on fetching on its new connection without timing out again:
			// later records arrive, over more than one timeout's span of long polls.
			time.Sleep(2 * (requestTimeout + maxWait))
			f.produceValues(topic, 0, "d")
			if next := f.pollN(c, 1); string(next[0].Value) != "d" {
				t.Fatalf("next record %q, want d", next[0].Value)
			}
			after := proxy.snapshot()[before:]
			for _, pc := range after[1:] {
				if !pc.closed.IsZero() {
					t.Errorf("a fetch connection that answered was closed: %+v (of %d)", pc, len(after))
				}
			}
		})
	}
}
