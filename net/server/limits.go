package server

import (
	"net"
	"sync"
	"time"
)

// Connection limits are checked at accept, before anything is allocated for the connection:
// one over a limit is closed at once (its peer reads end of file) and counted in
// Stats.Refused. The counts are kept under Server.mu: a connection is counted from its
// admission to forget.
//
// Listener names, for the per-listener limit and in logs, are Kafka's for the TCP listener
// (PLAINTEXT, the only security protocol Sluice speaks) and "unix" for the unix socket.
const (
	ListenerTCP  = "plaintext"
	ListenerUnix = "unix"
)

// Which limit refused a connection, by its Kafka name.
const (
	limitTotal    = "max.connections"
	limitListener = "listener.name.<listener>.max.connections"
	limitPerIP    = "max.connections.per.ip"
)

// listenerIndex is a transport's slot in the per-listener counts.
func listenerIndex(transport string) int {
	if transport == "unix" {
		return 1
	}
	return 0
}

// peerIP is what the per-address limit and the refusal log count a connection under: the
// peer's IP on TCP, "" on a unix socket (whose peers have no address; the per-address limit
// does not apply to them).
func peerIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

// admit counts a new connection from ip on transport against the limits, or returns the
// name of the limit it is over and that limit.
func (s *Server) admit(ip, transport string) (limit string, max int) {
	li := listenerIndex(transport)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.cfg.MaxConnections > 0 && s.mu.admitted >= s.cfg.MaxConnections:
		return limitTotal, s.cfg.MaxConnections
	case s.listenerMax[li] > 0 && s.mu.perListener[li] >= s.listenerMax[li]:
		return limitListener, s.listenerMax[li]
	case ip != "" && s.cfg.MaxConnectionsPerIP > 0 && s.mu.perIP[ip] >= s.cfg.MaxConnectionsPerIP:
		return limitPerIP, s.cfg.MaxConnectionsPerIP
	}
	s.mu.admitted++
	s.mu.perListener[li]++
	if ip != "" {
		s.mu.perIP[ip]++
	}
	return "", 0
}

// leave uncounts a connection admit counted.
func (s *Server) leave(ip, transport string) {
	li := listenerIndex(transport)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.admitted--
	s.mu.perListener[li]--
	if ip != "" {
		if s.mu.perIP[ip]--; s.mu.perIP[ip] <= 0 {
			delete(s.mu.perIP, ip)
		}
	}
}

// refuse closes a connection over a limit, with a log line rate-limited per address. It
// counts and logs first, so whoever sees the close sees them.
func (s *Server) refuse(nc net.Conn, ip, transport, limit string, max int) {
	defer nc.Close()
	s.stats.refused.Add(1)
	addr := ip
	if addr == "" {
		addr = transport
	}
	if n, ok := s.refusals.note(addr, time.Now()); ok {
		s.log.Warn("server: connection refused: over a connection limit",
			"listener", listenerName(transport), "remote", addr, "limit", limit, "max", max,
			"refused", n) // since the last line for this address
	}
}

func listenerName(transport string) string {
	if transport == "unix" {
		return ListenerUnix
	}
	return ListenerTCP
}

// maxRefusalAddrs bounds the addresses refusalLog remembers: past it, addresses whose last
// line is an interval old are forgotten, and if none is, the new address is counted under
// refusalOthers, so a peer with many addresses cannot grow the map or the log without bound.
const (
	maxRefusalAddrs = 4096
	refusalOthers   = "other addresses"
)

// refusalLog rate-limits the refusal log lines: one line per address per interval, saying
// how many connections from it were refused since its last line. Accept goroutines only;
// its own mutex.
type refusalLog struct {
	interval time.Duration
	mu       struct {
		sync.Mutex
		addrs map[string]*refusals
	}
}

type refusals struct {
	last    time.Time // of the last line
	pending int       // refused since then, not yet logged
}

// note records a refusal from addr at now and reports whether to log a line, and the count
// of refusals it covers (this one included).
func (l *refusalLog) note(addr string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.addrs == nil {
		l.mu.addrs = make(map[string]*refusals)
	}
	r := l.mu.addrs[addr]
	if r == nil {
		if len(l.mu.addrs) >= maxRefusalAddrs {
			for a, old := range l.mu.addrs {
				if now.Sub(old.last) >= l.interval { // its unlogged count, if any, is dropped
					delete(l.mu.addrs, a)
				}
			}
		}
		if len(l.mu.addrs) >= maxRefusalAddrs {
			addr = refusalOthers
			r = l.mu.addrs[addr]
		}
		if r == nil {
			l.mu.addrs[addr] = &refusals{last: now}
			return 1, true
		}
	}
	r.pending++
	if now.Sub(r.last) < l.interval {
		return 0, false
	}
	n := r.pending
	r.pending, r.last = 0, now
	return n, true
}
