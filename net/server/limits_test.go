package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// logRecorder is a slog.Handler that keeps the records' messages and attributes.
type logRecorder struct {
	mu      sync.Mutex
	records []recorded
}

type recorded struct {
	msg   string
	attrs map[string]slog.Value
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := recorded{msg: r.Message, attrs: map[string]slog.Value{}}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value; return true })
	l.mu.Lock()
	l.records = append(l.records, rec)
	l.mu.Unlock()
	return nil
}

// matching returns the records whose message is msg.
func (l *logRecorder) matching(msg string) []recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []recorded
	for _, r := range l.records {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

const refusedMsg = "server: connection refused: over a connection limit"

// roundTrip checks that c is served.
func (c *client) roundTrip(corr int32) {
	c.t.Helper()
	c.send(wire.Metadata, corr, []byte("ping"))
	if got, body := c.recv(); got != corr || string(body) != "ping" {
		c.t.Fatalf("got %d %q, want %d ping", got, body, corr)
	}
}

// A connection over max.connections is closed at accept, whichever listener it came to, and
// counted; once a connection ends its place can be taken again.
func TestMaxConnections(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			cfg := testConfig(t, tr)
			cfg.MaxConnections = 2
			s := startServer(t, cfg, echo)
			a, b := dial(t, s, tr), dial(t, s, tr)
			a.roundTrip(1)
			b.roundTrip(2)
			dial(t, s, tr).expectClosed()
			if st := s.Stats(); st.Refused != 1 || st.Open != 2 {
				t.Fatalf("refused %d, open %d; want 1 and 2", st.Refused, st.Open)
			}
			a.nc.Close()
			waitFor(t, "the closed connection forgotten", func() bool { return s.Stats().Open == 1 })
			dial(t, s, tr).roundTrip(3)
		})
	}
}

// max.connections.per.ip counts TCP connections by peer address; unix-socket peers have none
// and are not limited by it.
func TestMaxConnectionsPerIP(t *testing.T) {
	cfg := testConfig(t, "tcp")
	cfg.UnixPath = testConfig(t, "unix").UnixPath
	cfg.MaxConnectionsPerIP = 1
	s := startServer(t, cfg, echo)
	dial(t, s, "tcp").roundTrip(1)
	dial(t, s, "tcp").expectClosed()
	dial(t, s, "unix").roundTrip(2)
	dial(t, s, "unix").roundTrip(3)
	if st := s.Stats(); st.Refused != 1 {
		t.Fatalf("refused %d, want 1", st.Refused)
	}
}

// listener.name.<listener>.max.connections limits one listener only; an unknown listener name
// is refused by New.
func TestListenerMaxConnections(t *testing.T) {
	cfg := testConfig(t, "tcp")
	cfg.UnixPath = testConfig(t, "unix").UnixPath
	cfg.ListenerMaxConnections = map[string]int{ListenerUnix: 1}
	s := startServer(t, cfg, echo)
	dial(t, s, "unix").roundTrip(1)
	dial(t, s, "unix").expectClosed()
	dial(t, s, "tcp").roundTrip(2)
	dial(t, s, "tcp").roundTrip(3)

	bad := testConfig(t, "tcp")
	bad.ListenerMaxConnections = map[string]int{"SSL": 1}
	if _, err := New(bad, echo); !errors.Is(err, ErrUnknownListener) {
		t.Fatalf("New with listener SSL: %v, want ErrUnknownListener", err)
	}
}

// A peer retrying in a loop against a limit gets one log line per address per interval, not
// one per refusal.
func TestRefusedConnectionsLogRateLimited(t *testing.T) {
	rec := &logRecorder{}
	cfg := testConfig(t, "tcp")
	cfg.Logger = slog.New(rec)
	cfg.MaxConnections = 1
	cfg.RefusedLogInterval = time.Hour
	s := startServer(t, cfg, echo)
	dial(t, s, "tcp").roundTrip(1)
	const refused = 5
	for range refused {
		dial(t, s, "tcp").expectClosed()
	}
	waitFor(t, "refusals counted", func() bool { return s.Stats().Refused == refused })
	lines := rec.matching(refusedMsg)
	if len(lines) != 1 {
		t.Fatalf("%d refusal lines for %d refusals in one interval, want 1", len(lines), refused)
	}
	l := lines[0]
	if l.attrs["remote"].String() != "127.0.0.1" || l.attrs["limit"].String() != limitTotal ||
		l.attrs["refused"].Int64() != 1 || l.attrs["listener"].String() != ListenerTCP {
		t.Fatalf("refusal line %v", l.attrs)
	}
}

// The refusal log's arithmetic, with explicit times: the first refusal from an address is
// logged, the next ones within the interval are counted, and the first after it logs the count
// since the last line; addresses are counted apart; past maxRefusalAddrs addresses, stale ones
// are forgotten and otherwise new ones share one entry.
func TestRefusalLogCounts(t *testing.T) {
	l := refusalLog{interval: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		addr    string
		at      time.Duration
		n       int
		logLine bool
	}{
		{"10.0.0.1", 0, 1, true},
		{"10.0.0.1", time.Second, 0, false},
		{"10.0.0.2", time.Second, 1, true},
		{"10.0.0.1", 9 * time.Second, 0, false},
		{"10.0.0.1", 10 * time.Second, 3, true}, // two unlogged and this one
		{"10.0.0.1", 11 * time.Second, 0, false},
		{"10.0.0.1", 30 * time.Second, 2, true},
	}
	for i, st := range steps {
		n, ok := l.note(st.addr, at(st.at))
		if ok != st.logLine || n != st.n {
			t.Fatalf("step %d (%s at %v): got (%d, %v), want (%d, %v)", i, st.addr, st.at, n, ok, st.n, st.logLine)
		}
	}

	full := refusalLog{interval: 10 * time.Second}
	for i := range maxRefusalAddrs {
		full.note(net.IPv4(10, 1, byte(i>>8), byte(i)).String(), t0)
	}
	if n, ok := full.note("192.0.2.1", at(time.Second)); !ok || n != 1 {
		t.Fatalf("first address past the bound: (%d, %v), want its own line", n, ok)
	}
	if got := len(full.mu.addrs); got != maxRefusalAddrs+1 {
		t.Fatalf("%d addresses kept, want %d (the bound and the shared entry)", got, maxRefusalAddrs+1)
	}
	if _, ok := full.note("192.0.2.2", at(2*time.Second)); ok {
		t.Fatal("a second address past the bound logged its own line within the interval")
	}
	if n, ok := full.note("192.0.2.3", at(time.Minute)); !ok || n != 1 || len(full.mu.addrs) != 1 {
		t.Fatalf("after the interval: (%d, %v) with %d addresses kept; want the stale ones forgotten", n, ok, len(full.mu.addrs))
	}
}

// emfileListener is a real listener whose Accept fails with EMFILE while failing is set, as
// a process at its open-file limit sees: the connection waits in the listen queue.
type emfileListener struct {
	net.Listener
	failing atomic.Bool
	calls   atomic.Int64
}

func (l *emfileListener) Accept() (net.Conn, error) {
	l.calls.Add(1)
	if l.failing.Load() {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// maxAcceptCalls is the most Accept calls an accept loop that backs off as acceptLoop does
// can make in d from its first: a timer never fires early, so a loaded machine makes fewer.
func maxAcceptCalls(d time.Duration) int64 {
	calls, backoff, slept := int64(1), time.Duration(0), time.Duration(0)
	for {
		backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
		if slept += backoff; slept > d {
			return calls
		}
		calls++
	}
}

// At its open-file limit, accept fails with EMFILE over and over: the accept loop backs off
// (it does not spin), logs the episode once, and accepts again as soon as descriptors free.
func TestAcceptBacksOffOnEMFILE(t *testing.T) {
	rec := &logRecorder{}
	ln := &emfileListener{}
	ln.failing.Store(true)
	cfg := testConfig(t, "tcp")
	cfg.Logger = slog.New(rec)
	cfg.Listen = func(network, addr string) (net.Listener, error) {
		inner, err := net.Listen(network, addr)
		ln.Listener = inner
		return ln, err
	}
	start := time.Now()
	s := startServer(t, cfg, echo)
	// 7 calls take at least 5+10+20+40+80+160 ms of backoff; a spinning loop makes thousands.
	waitFor(t, "accept retried", func() bool { return ln.calls.Load() >= 7 })
	calls, elapsed := ln.calls.Load(), time.Since(start)
	if most := maxAcceptCalls(elapsed); calls > most {
		t.Fatalf("%d accept calls in %v; backing off allows at most %d", calls, elapsed, most)
	}
	if n := len(rec.matching("server: accept failed; retrying with backoff")); n != 1 {
		t.Fatalf("%d log lines for one EMFILE episode, want 1", n)
	}

	c := dial(t, s, "tcp") // waits in the listen queue
	ln.failing.Store(false)
	c.roundTrip(1)
	again := rec.matching("server: accepting again")
	if len(again) != 1 || again[0].attrs["failures"].Int64() < 7 {
		t.Fatalf("recovery lines %v, want one counting the failures", again)
	}
}
