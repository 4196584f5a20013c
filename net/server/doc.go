// Package server owns Sluice's sockets: the TCP and unix-socket listeners,
// the connections, request framing, pipelining and response writing,
// including zero-copy Fetch responses sent with sendfile(2). It knows nothing
// of topics or logs: a broker plugs in a Handler.
//
// # Goroutine model
//
// A Server runs one accept goroutine per listener and, per connection, one
// reader and one writer goroutine, and an overlap goroutine once the
// connection has sent a large request. All of them are started by New, by
// the accept loop or by the reader, and are waited for by Close.
//
//	accept ──> Conn ──┬─ reader: size ─> frame ─> header ─> Handler.Serve ─┬─> queue
//	                  │                                                      └─> direct write ─> release
//	                  │                                                          (what would block ─> queue)
//	                  ├─ overlap: large requests ─> Handler.Serve ─> queue
//	                  └─ writer: queue ─> wait Complete ─> write parts ─> release
//
// The reader reads the 4-byte size, checks it with wire.ReadFrameSize
// against Config.MaxRequestBytes before allocating, charges the frame to the
// server's request budget (Config.QueuedMaxRequestBytes, waiting for room if
// need be), reads the frame into a pooled buffer (for a frame over 1 MiB that
// is not already buffered whole, into 1 MiB chunks until half of it has
// arrived, then into its own buffer), decodes the
// header and calls Handler.Serve, which starts the
// work and returns a Pending at once. The reader then reads the next request
// without waiting for the response (pipelining). The writer takes Pendings
// from the queue in request order, waits for each to be completed (possibly
// out of order: a produce with acks=all waits for an fsync, a fetch long
// polls), writes its parts, and releases it.
//
// A request of Config.OverlapBytes or more (a produce of many batches) goes
// to the overlap goroutine instead, and the reader reads on: copying the next
// request out of the socket overlaps the handler's check and append of this
// one. A handler that is a BodyLoader may have the reader load a request's
// body from elsewhere (a producer's shared-memory region) right after the
// frame is read; the loaded body then counts as the request's size. A smaller request is served by the reader once the overlap goroutine
// has served everything before it, so the handler sees one request at a
// time, in request order, whoever calls it.
//
// A Pending that Serve returns completed, when nothing is queued or being
// written ahead of it and no further request is already buffered, is written
// by the reader itself, without waking the writer (a direct write): one
// goroutine hand-off fewer per response, which is most of the server's own
// cost for a consumer with one fetch in flight. The reader writes only what
// the socket takes without waiting and hands the rest to the writer, so it
// never waits for a client. Conn documents who owns the socket's write side
// when.
//
// # Passed descriptors and connection values
//
// On a unix socket the reader reads with recvmsg, and keeps the descriptors a
// peer passes with SCM_RIGHTS (at most a few; the rest are closed) for a
// handler to take (Conn.TakeFile): a producer on the broker's host passes its
// shared-memory region this way. A handler can keep values with the
// connection (Conn.SetValue, such as that region's mapping); the connection
// closes them, and any descriptors not taken, after its last request has
// been served.
//
// # Limits
//
// Connections over Config.MaxConnections, a listener's
// Config.ListenerMaxConnections or Config.MaxConnectionsPerIP (Kafka's
// max.connections, listener.name.<listener>.max.connections with listeners
// named ListenerTCP and ListenerUnix, and max.connections.per.ip) are closed
// at accept, with one log line per address per Config.RefusedLogInterval.
// When accept fails for want of descriptors (EMFILE, ENFILE) or memory, the
// accept loop backs off from 5 ms to 1 s rather than spin.
//
// The bytes of request frames being read or waiting for their responses are
// bounded server-wide by Config.QueuedMaxRequestBytes: a frame is charged its
// buffer's size once its size field is read, in arrival order, and gives it
// back with the buffer (see budget). A connection that finds no room stops
// reading until there is: its peer is held back by TCP flow control, nothing
// is dropped. A frame larger than the whole bound is read alone.
//
// A frame must arrive whole within Config.RequestTimeout of its first byte;
// a slower one closes its connection. The read deadline moves for that only
// when a frame is not already buffered whole, so small requests cost no timer
// change. A frame's time starts when the reader comes to it, if its first bytes
// were buffered with an earlier frame. A peer that takes no byte of a response
// for as long is closed too: the frames behind its response hold the budget.
// A handler that keeps a request waiting long (a long poll) calls
// Pending.RequestDone, so that its frame does not hold the budget meanwhile.
//
// # Invariants
//
//   - Responses are written in request order, whatever order the Pendings
//     complete in.
//   - Handler.Serve is called in request order, one call at a time per
//     connection.
//   - At most Config.MaxInFlight requests of a connection have been read and
//     not yet answered; beyond that the reader stops reading the socket, so a
//     slow client slows only itself (backpressure through TCP flow control).
//   - No frame buffer is allocated before its size is checked and charged to
//     the budget. A frame over 1 MiB that is not buffered whole holds, until
//     half of it has arrived, what has arrived rounded up to 1 MiB (pooled
//     chunks), and then a buffer of its declared size: never more than about
//     twice what has arrived of it, or 1 MiB.
//   - The budget's charges never exceed Config.QueuedMaxRequestBytes, and are
//     given back exactly once with the frame buffer: Stats.QueuedRequestBytes
//     and Stats.FrameBufferBytes are zero once every connection has closed.
//     Pooled buffers are at most 4 MiB each, kept by sync.Pool (which the
//     garbage collector empties of unused ones), so what the pools keep is
//     bounded by what the budget let frames hold at once; larger buffers are
//     not pooled, and a connection that dies with one half read has the free
//     memory returned to the operating system (at most once per 10 s).
//   - A request's frame buffer, and everything its Response refers to, stays
//     valid until the response has been written (or the connection has
//     died); then the Response's OnDone hooks run exactly once and the frame
//     buffer goes back to its pool.
//   - File parts go to the socket with sendfile at an explicit offset: never
//     through user space, and never through a file's shared position, which
//     concurrent fetches of one segment would race on. Files without a
//     descriptor (MemFS) are copied with ReadAt, and counted as such in Stats.
//   - A malformed frame closes its connection only, after the responses
//     already queued on it are written.
//
// # Listeners
//
// Config.Listen opens both listeners (nil: net.Listen), so that a test runs several servers in
// one process on a network it controls (kfake's ListenFn): a listener whose connections have no
// descriptor (net.Pipe, a fault-injecting wrapper) is served as TCP is, its file parts written
// without sendfile.
//
// # Closing
//
// A connection ends when its peer closes it, on a malformed frame, when it
// has been idle (no request read and no response outstanding) for
// Config.IdleTimeout, when a frame has taken longer than
// Config.RequestTimeout to arrive, when the handler calls Conn.Close, or when
// the server closes. In every case but a write error or a hard close, the reader stops
// first and the writer finishes the queued responses before closing the
// socket. Server.Close stops accepting, lets in-flight requests finish and
// their responses be written, and closes connections hard when its context
// ends.
//
// Lock order: none is needed. The mutexes (Server.mu, Conn.attachMu,
// budget.mu, refusalLog.mu) are never held together, nor across I/O.
package server
