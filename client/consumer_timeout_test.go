package client_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// freezingProxy stands at a unix socket path and forwards each connection to the broker's
// socket. Once armed (freezeNextFetch), the first connection whose first request (after any
// ApiVersions) is a Fetch or FetchShared gets no more of the broker's replies (its requests
// still reach it), as when a broker hangs; other connections (metadata and offset lookups,
// whenever they are dialled) are left alone. It records each connection's first request, when
// it opened and when its client closed it.
type freezingProxy struct {
	ln     net.Listener
	target string

	mu          sync.Mutex
	freezeFetch bool // armed: freeze the next connection that starts with a Fetch
	conns       []*proxiedConn
	open        []net.Conn // both sides of every connection, closed at cleanup
}

type proxiedConn struct {
	first  wire.APIKey // api key of the connection's first request but ApiVersions (-1 until it is read)
	frozen bool
	// opened: when the proxy accepted it (before its own dial to the broker and before the
	// first request is read); closed: when the client's side reached EOF (zero until then).
	opened, closed time.Time
}

func newFreezingProxy(t *testing.T, path, target string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln, target: target}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		// A client left open (say a consumer whose construction failed) must not hold up
		// the cleanup.
		p.mu.Lock()
		for _, c := range p.open {
			_ = c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			// Stamped as early as the proxy can: the fetcher's request timer started before
			// its dial, and a late stamp would make the connection look shorter-lived.
			pc := &proxiedConn{first: -1, opened: time.Now()}
			p.mu.Lock()
			p.conns = append(p.conns, pc)
			p.open = append(p.open, cc)
			p.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.forward(cc, pc, &wg)
			}()
		}
	}()
	return p
}

// forward relays cc to the broker: client → broker always, broker → client unless the
// connection's first request makes it the frozen fetch.
func (p *freezingProxy) forward(cc net.Conn, pc *proxiedConn, wg *sync.WaitGroup) {
	end := func() {
		p.mu.Lock()
		pc.closed = time.Now()
		p.mu.Unlock()
	}
	bc, err := net.Dial("unix", p.target)
	if err != nil {
		_ = cc.Close()
		end()
		return
	}
	p.mu.Lock()
	p.open = append(p.open, bc)
	p.mu.Unlock()
	wg.Add(1)
	go func() { // broker → client, until the connection is frozen
		defer wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, err := bc.Read(buf)
			p.mu.Lock()
			frozen := pc.frozen
			p.mu.Unlock()
			if n > 0 && !frozen {
				if _, werr := cc.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = cc.Close()
	}()
	// A request frame starts with its size, then the request header's api key (net/wire). A
	// fetcher that may read the broker's files asks ApiVersions first: the connection is
	// known by its first other request, and the ApiVersions answers go through.
	for {
		var hdr [wire.FrameSizeLen + 2]byte
		if _, err := io.ReadFull(cc, hdr[:]); err != nil {
			break
		}
		key := wire.APIKey(int16(binary.BigEndian.Uint16(hdr[wire.FrameSizeLen:])))
		if _, err := bc.Write(hdr[:]); err != nil {
			break
		}
		if key == wire.APIVersions {
			rest := int64(binary.BigEndian.Uint32(hdr[:wire.FrameSizeLen])) - 2
			if _, err := io.CopyN(bc, cc, rest); err != nil {
				break
			}
			continue
		}
		p.mu.Lock()
		pc.first = key
		if (key == wire.Fetch || key == wire.FetchShared) && p.freezeFetch {
			pc.frozen, p.freezeFetch = true, false
		}
		p.mu.Unlock()
		_, _ = io.Copy(bc, cc) // client → broker, always
		break
	}
	end()
	_ = bc.Close()
	_ = cc.Close()
}

// freezeNextFetch arms the proxy: the next connection whose first request (after any ApiVersions) is a fetch hangs.
func (p *freezingProxy) freezeNextFetch() {
	p.mu.Lock()
	p.freezeFetch = true
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

// frozenFetch returns the index of the frozen connection in conns (-1: none) and the fetch
// connections opened after it.
func frozenFetch(conns []proxiedConn) (int, []proxiedConn) {
	for i, c := range conns {
		if !c.frozen {
			continue
		}
		var later []proxiedConn
		for _, l := range conns[i+1:] {
			if l.first == wire.Fetch || l.first == wire.FetchShared {
				later = append(later, l)
			}
		}
		return i, later
	}
	return -1, nil
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
			// Each mode has its own broker and proxy, and most of its time is spent waiting
			// out timeouts: the modes wait side by side.
			t.Parallel()
			f := newConsumerFixture(t)
			// The consumer reaches the broker at the unix path the broker advertises, so the
			// proxy takes that path and the broker's socket moves aside.
			advertised := f.b.UnixAddr().String()
			moved := filepath.Join(t.TempDir(), "moved.sock")
			if err := os.Rename(advertised, moved); err != nil {
				t.Fatal(err)
			}
			proxy := newFreezingProxy(t, advertised, moved)
			// Armed before anything can start the fetcher (Position does): its first
			// connection hangs, whenever it is dialled, and the lookups' connections do not.
			proxy.freezeNextFetch()

			topic := "timeout-" + mode.name
			f.createTopic(topic, 1)
			f.produceValues(topic, 0, "a", "b", "c")
			tp := client.TopicPartition{Topic: topic}

			// maxWait is also the slack of the lower bound on the frozen connection's life
			// below (the timer starts before the proxy sees the connection). requestTimeout
			// is also what every answered fetch has beyond its long poll, and the test fails
			// if one of them times out: 2 s for a loaded machine.
			const requestTimeout, maxWait = 2 * time.Second, 250 * time.Millisecond
			var failures atomic.Int64
			cfg := client.ConsumerConfig{
				Config:             client.Config{Brokers: []string{"unix://" + advertised}, RequestTimeout: requestTimeout, Logger: client.FetchFailureLogger(&failures)},
				FetchMaxWait:       maxWait,
				RetryBackoff:       10 * time.Millisecond,
				AutoOffsetReset:    client.OffsetResetEarliest,
				ReuseRecordBuffers: mode.reuse,
			}
			// The request timeout also bounds the bootstrap metadata request (through the
			// proxy), which a loaded machine can take longer to answer: retry the
			// construction, which is not what this test is about.
			var c *client.Consumer
			for attempt := 1; ; attempt++ {
				var err error
				if c, err = client.NewConsumer(f.ctx, cfg); err == nil {
					break
				}
				if !errors.Is(err, context.DeadlineExceeded) || attempt == 10 || f.ctx.Err() != nil {
					t.Fatalf("NewConsumer, attempt %d: %v", attempt, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Cleanup(func() { _ = c.Close(context.Background()) })
			if err := c.Assign([]client.TopicPartition{tp}); err != nil {
				t.Fatal(err)
			}
			if pos, err := c.Position(f.ctx, tp); err != nil || pos != 0 {
				t.Fatalf("Position = %d, %v; want 0", pos, err)
			}
			done := make(chan []client.Record, 1)
			go func() { done <- f.pollN(c, 3) }()

			var got []client.Record
			select {
			case got = <-done:
			case <-f.ctx.Done():
				t.Fatal("no records after the frozen fetch: the request never timed out")
			}
			if vals := []string{string(got[0].Value), string(got[1].Value), string(got[2].Value)}; vals[0] != "a" || vals[2] != "c" {
				t.Fatalf("records %q, want a b c", vals)
			}
			conns := proxy.snapshot()
			i, later := frozenFetch(conns)
			if i < 0 || len(later) == 0 {
				t.Fatalf("connections: %+v, want the frozen fetch and a new fetch connection after it", conns)
			}
			if failures.Load() == 0 {
				t.Error("no fetch failure logged: the timeout was taken for a seek's cancellation")
			}
			// The consumer closed the frozen connection before it refetched; the proxy notices
			// the end of the stream on its own time.
			frozen := conns[i]
			for frozen.closed.IsZero() {
				if f.ctx.Err() != nil {
					t.Fatal("the frozen fetch's connection is still open: a request that timed out must end it")
				}
				time.Sleep(time.Millisecond)
				frozen = proxy.snapshot()[i]
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
			_, after := frozenFetch(proxy.snapshot())
			for _, pc := range after {
				if !pc.closed.IsZero() {
					t.Errorf("a fetch connection that answered was closed: %+v (of %d)", pc, len(after))
				}
			}
		})
	}
}

// levelCounter counts log records by level.
type levelCounter struct {
	warn, debug atomic.Int64
}

func (h *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *levelCounter) WithGroup(string) slog.Handler            { return h }
func (h *levelCounter) Handle(_ context.Context, r slog.Record) error {
	switch {
	case r.Level >= slog.LevelWarn:
		h.warn.Add(1)
	case r.Level == slog.LevelDebug && strings.Contains(r.Message, "sluice consumer"):
		h.debug.Add(1)
	}
	return nil
}

// A consumer whose broker went away retries with exponentially longer waits (RetryBackoff
// doubled per failure, up to RetryBackoffMax) and warns once per kind of failure, not at every
// retry: with a fixed 100 ms backoff it logged about 30 warnings a second.
func TestConsumerBacksOffWhileBrokerIsDown(t *testing.T) {
	f := newConsumerFixture(t)
	tp := f.topicOfBatches("backoff", 1)
	var logs levelCounter
	c := f.consumer(client.ConsumerConfig{Config: client.Config{Logger: slog.New(&logs)}, AutoOffsetReset: client.OffsetResetEarliest,
		RetryBackoff: 50 * time.Millisecond, RetryBackoffMax: 800 * time.Millisecond}, tp)
	if recs, err := c.Poll(f.ctx); err != nil || len(recs) == 0 {
		t.Fatalf("Poll before the broker went away: %d records, %v", len(recs), err)
	}
	if err := f.b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The rest of the topic is buffered or fetched; then the broker's absence shows.
	ctx, cancel := context.WithTimeout(f.ctx, 3*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		_, _ = c.Poll(ctx)
	}
	// With 50 ms doubling to 800 ms (±20 %), 3 s hold about 7 retries of each loop; a fixed
	// 50 ms backoff would have made 60.
	attempts := logs.warn.Load() + logs.debug.Load()
	t.Logf("in 3 s without a broker: %d warnings, %d debug retries", logs.warn.Load(), logs.debug.Load())
	if w := logs.warn.Load(); w < 1 || w > 6 {
		t.Errorf("%d warnings while the broker was down, want a few (the first failure of each kind)", w)
	}
	if attempts > 30 {
		t.Errorf("%d failed attempts logged in 3 s: the retries do not back off", attempts)
	}
}

// Close with a context without a deadline returns even when its final commit cannot succeed:
// the topic was deleted (UNKNOWN_TOPIC_OR_PARTITION, retriable) or the broker is gone. It
// used to retry forever; now it stops at the default close timeout and says what it was
// retrying after. A bounded CommitSync reports the cause too, not a bare deadline.
func TestConsumerCloseIsBoundedWhenTheCommitCannotSucceed(t *testing.T) {
	client.SetDefaultCloseTimeout(t, time.Second)
	for _, how := range []string{"topic deleted", "broker gone"} {
		t.Run(how, func(t *testing.T) {
			f := newConsumerFixture(t)
			tp := f.topicOfBatches("gone", 2)
			c := f.consumer(client.ConsumerConfig{GroupID: "g", AutoOffsetReset: client.OffsetResetEarliest,
				RetryBackoff: 20 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond}, tp)
			if recs, err := c.Poll(f.ctx); err != nil || len(recs) == 0 {
				t.Fatalf("Poll: %d records, %v", len(recs), err)
			}
			switch how {
			case "topic deleted":
				var dr wire.DeleteTopicsResponse
				if err := f.conn.Call(f.ctx, &wire.DeleteTopicsRequest{Topics: []string{"gone"}, TimeoutMs: 5000}, &dr); err != nil {
					t.Fatal(err)
				}
				// The cause is there once the broker has answered at least once before the
				// deadline, and the commit reports within a moment of it: a loaded machine
				// may miss either, so three tries.
				var err error
				for range 3 {
					ctx, cancel := context.WithTimeout(f.ctx, time.Second)
					err = c.CommitSync(ctx)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) && errors.Is(err, wire.ErrUnknownTopicOrPartition) {
						break
					}
				}
				if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
					t.Fatalf("CommitSync of a deleted topic: %v, want the deadline and what was retried", err)
				}
			case "broker gone":
				if err := f.b.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			err := c.Close(context.Background())
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("Close took %v with a 1 s default bound", d)
			}
			if err == nil || !strings.Contains(err.Error(), "final commit") {
				t.Fatalf("Close: %v, want the final commit's failure", err)
			}
		})
	}
}
