package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"time"
)

const (
	// chunkSize is the most a delayed direction reads at once: the unit it holds.
	chunkSize = 32 << 10
	// maxHeld bounds the bytes a delayed direction holds: past it, it stops reading (and TCP's
	// flow control stops the writer) until the oldest chunk is due.
	maxHeld = 4 << 20
)

// pump carries one direction of c, from src to dst, under rule r, until either side ends;
// then it closes the whole connection.
func (p *Proxy) pump(c *conn, src, dst net.Conn, r Rule) {
	defer p.closeConn(c)
	switch {
	case r.Drop:
		_, _ = io.Copy(io.Discard, src)
	case r.Delay > 0:
		delayed(c.ctx, src, dst, r.Delay)
	default:
		_, _ = io.Copy(dst, src)
	}
}

// chunk is bytes read at some time, to be written at due.
type chunk struct {
	due time.Time
	b   []byte
}

// delayed copies src to dst, writing each chunk d after it was read. It keeps reading while it
// holds chunks (up to maxHeld bytes), waking from a read at the oldest chunk's due time by a
// read deadline, so that the link keeps its throughput: one goroutine holds the queue and
// needs no lock. After src's EOF it delivers what it holds, then returns.
func delayed(ctx context.Context, src, dst net.Conn, d time.Duration) {
	var q []chunk
	held := 0
	eof := false
	buf := make([]byte, chunkSize)
	for {
		for now := time.Now(); len(q) > 0 && !q[0].due.After(now); {
			if _, err := dst.Write(q[0].b); err != nil {
				return
			}
			held -= len(q[0].b)
			q[0] = chunk{}
			q = q[1:]
		}
		if eof && len(q) == 0 {
			return
		}
		if eof || held >= maxHeld {
			if !wait(ctx, time.Until(q[0].due)) {
				return
			}
			continue
		}
		var deadline time.Time // none while nothing is held
		if len(q) > 0 {
			deadline = q[0].due
		}
		if err := src.SetReadDeadline(deadline); err != nil {
			return
		}
		n, err := src.Read(buf)
		if n > 0 {
			q = append(q, chunk{due: time.Now().Add(d), b: bytes.Clone(buf[:n])})
			held += n
		}
		switch {
		case err == nil, errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, io.EOF):
			eof = true
		default:
			return
		}
	}
}

// wait waits d (the link's latency, not a wait for a condition) or until ctx ends; it reports
// whether d passed.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
