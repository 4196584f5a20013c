package server

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by Close when the server is already closed.
	ErrClosed = errors.New("server: closed")
	// ErrNoListener is returned by New when the Config names neither a TCP
	// address nor a unix socket path.
	ErrNoListener = errors.New("server: no listener configured")
	// ErrUnixSocketInUse is returned by New when the unix socket path is
	// held by a live listener.
	ErrUnixSocketInUse = errors.New("server: unix socket in use")
	// ErrNotSocket is returned by New when the unix socket path exists and
	// is not a socket; it is never removed.
	ErrNotSocket = errors.New("server: unix socket path exists and is not a socket")
	// ErrUnknownListener is returned by New when Config.ListenerMaxConnections
	// names a listener other than ListenerTCP and ListenerUnix.
	ErrUnknownListener = errors.New("server: unknown listener name")

	// errStopped ends a reader that was asked to stop (Conn.Close, Server.Close).
	errStopped = errors.New("server: connection stopped")
	// errIdle ends a reader whose connection has been idle for IdleTimeout.
	errIdle = errors.New("server: connection idle")
	// errSlowFrame ends a reader whose request frame has not arrived whole
	// within RequestTimeout of its first byte.
	errSlowFrame = errors.New("server: request frame not received within the request timeout")
	// errSlowWrite ends a connection whose peer took none of a response's bytes within the
	// request timeout (see armWrite).
	errSlowWrite = errors.New("server: response not taken by the peer within the request timeout")
	// errShortFile: a file part runs past the end of its file; the frame
	// size already promised those bytes, so the connection must close.
	errShortFile = errors.New("server: file part runs past end of file")
	// errWriterGone ends a reader whose writer has exited (write error or
	// hard close).
	errWriterGone = errors.New("server: connection writer exited")
	// errHardClosed ends a writer on a hard close.
	errHardClosed = errors.New("server: connection closed hard")
	// errWouldBlock stops a direct write at a full socket buffer; the
	// writer goroutine sends the rest.
	errWouldBlock = errors.New("server: socket buffer full")
)

// malformedError is a frame that cannot be parsed: the connection must
// close since the next frame boundary is unknown.
type malformedError struct{ err error }

func (e *malformedError) Error() string { return fmt.Sprintf("malformed frame: %v", e.err) }
func (e *malformedError) Unwrap() error { return e.err }
