package broker

import (
	"errors"
	"math"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
)

// The connection and request properties: their ranges, what they parse to, and the default of
// max.connections, a quarter of the open-file limit.
func TestConnectionProperties(t *testing.T) {
	for _, bad := range []struct{ in, want string }{
		{"max.connections=0", "[1, 2147483647]"},
		{"max.connections=2147483648", "[1, 2147483647]"},
		{"max.connections.per.ip=0", "[1, 2147483647]"},
		{"listener.name.plaintext.max.connections=0", "[1, 2147483647]"},
		{"listener.name.unix.max.connections=-1", "[1, 2147483647]"},
		{"request.timeout.ms=0", "not supported"},
		{"request.timeout.ms=-2", "-1 or [1, ...]"},
		{"queued.max.request.bytes=0", "not supported"},
		{"queued.max.request.bytes=-2", "-1 or [1, ...]"},
	} {
		c := DefaultConfig()
		err := ParseProperties(strings.NewReader(bad.in), &c)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want an error saying %q", bad.in, err, bad.want)
		}
	}
	for _, good := range []struct {
		in  string
		set func(c *Config)
	}{
		{"max.connections=1", func(c *Config) { c.MaxConnections = 1 }},
		{"max.connections.per.ip=2147483647", func(c *Config) { c.MaxConnectionsPerIP = math.MaxInt32 }},
		{"listener.name.plaintext.max.connections=3", func(c *Config) { c.PlaintextMaxConnections = 3 }},
		{"listener.name.unix.max.connections=4", func(c *Config) { c.UnixMaxConnections = 4 }},
		{"request.timeout.ms=1", func(c *Config) { c.RequestTimeout = time.Millisecond }},
		{"request.timeout.ms=-1", func(c *Config) { c.RequestTimeout = cluster.Forever }},
		{"queued.max.request.bytes=-1", func(c *Config) { c.QueuedMaxRequestBytes = -1 }},
		{"queued.max.request.bytes=1", func(c *Config) { c.QueuedMaxRequestBytes = 1 }},
	} {
		c := DefaultConfig()
		if err := ParseProperties(strings.NewReader(good.in), &c); err != nil {
			t.Errorf("%q: %v", good.in, err)
			continue
		}
		want := DefaultConfig()
		good.set(&want)
		d := c.withDefaults()
		d.Logger = nil
		if !reflect.DeepEqual(c, want) || !reflect.DeepEqual(d, c) {
			t.Errorf("%q parsed\n%+v\nwant (and after withDefaults)\n%+v", good.in, c, want)
		}
	}
	if d := DefaultConfig(); d.RequestTimeout != 30*time.Second || d.QueuedMaxRequestBytes != 100<<20 {
		t.Errorf("defaults: request.timeout.ms %v, queued.max.request.bytes %d", d.RequestTimeout, d.QueuedMaxRequestBytes)
	}

	c := Config{openFileLimit: 20000}
	if got := c.maxConnections(); got != 5000 {
		t.Errorf("max.connections unset at an open-file limit of 20000: %d, want 5000", got)
	}
	c.MaxConnections = 7
	if got := c.maxConnections(); got != 7 {
		t.Errorf("max.connections=7: %d", got)
	}
	c.UnixMaxConnections = 2
	if m := c.listenerMaxConnections(); len(m) != 1 || m[server.ListenerUnix] != 2 {
		t.Errorf("listener limits %v, want unix: 2", m)
	}
}

// The broker applies the properties: a connection over max.connections.per.ip or over the unix
// listener's own limit is closed at accept, and a frame trickled slower than request.timeout.ms
// is closed, over real sockets.
func TestBrokerConnectionLimits(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	props := "max.connections.per.ip=1\nlistener.name.unix.max.connections=1\nrequest.timeout.ms=200\n"
	if err := ParseProperties(strings.NewReader(props), &cfg); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, cfg)
	var md wire.MetadataResponse
	tcp := dial(t, b.Addr().String())
	call(t, tcp, &wire.MetadataRequest{}, &md)
	expectRefused(t, "tcp", b.Addr().String())
	unix := dial(t, "unix://"+b.UnixAddr().String())
	call(t, unix, &wire.MetadataRequest{}, &md)
	expectRefused(t, "unix", b.UnixAddr().String())
	if st := b.srv.Stats(); st.Refused != 2 {
		t.Fatalf("%d connections refused, want 2", st.Refused)
	}

	// The unix connection's place, freed, takes a frame that never completes.
	unix.Close()
	deadline := time.Now().Add(5 * time.Second)
	for b.srv.Stats().Open > 1 {
		if time.Now().After(deadline) {
			t.Fatal("the closed unix connection is still counted")
		}
		time.Sleep(time.Millisecond) // poll interval, not a wait for a condition
	}
	nc, err := net.Dial("unix", b.UnixAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte{0, 0, 0, 100, 0}); err != nil { // 5 of 104 bytes
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a frame stalled past request.timeout.ms: read %v, want the connection closed", err)
	}
}

// expectRefused dials addr and expects the connection closed without a byte.
func expectRefused(t *testing.T, network, addr string) {
	t.Helper()
	nc, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := nc.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("%s connection over the limit: read %d, %v; want it closed", network, n, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
