package broker

import "github.com/sluicemq/sluice/net/server"

// connectionShareDiv: unless max.connections is set, connections may hold a quarter of the
// process's open-file limit, and the other three quarters are kept for what the broker itself
// opens: the partitions' logs (about one descriptor each, plus the segments being read), raft's
// log and snapshots, checkpoint writes, the shared-memory regions producers pass over the unix
// socket (one more descriptor per such connection) and the accept loop's headroom. A share
// rather than a fixed count because those needs grow with the partitions, and the limit is
// what bounds the partitions a broker may host (checkOpenFiles): at a 20,000 limit, 5,000
// connections and 15,000 for 10,000 partitions; at the 1,048,576 the Go runtime usually raises
// the soft limit to, 262,144 connections. A connection past it is refused at accept, so the
// logs never meet EMFILE for want of descriptors that clients took.
const connectionShareDiv = 4

// maxConnections is max.connections, or its default from the open-file limit; 0 (no limit,
// Kafka's default) when that limit is unknown or infinite.
func (c Config) maxConnections() int {
	if c.MaxConnections > 0 {
		return c.MaxConnections
	}
	limit := c.openFileLimit
	if limit == 0 {
		limit = openFileLimit()
	}
	return int(min(limit/connectionShareDiv, 1<<31-1))
}

// listenerMaxConnections is the listener.name.<listener>.max.connections properties by
// listener name, or nil if none is set.
func (c Config) listenerMaxConnections() map[string]int {
	var m map[string]int
	for name, n := range map[string]int{server.ListenerTCP: c.PlaintextMaxConnections, server.ListenerUnix: c.UnixMaxConnections} {
		if n > 0 {
			if m == nil {
				m = make(map[string]int)
			}
			m[name] = n
		}
	}
	return m
}
