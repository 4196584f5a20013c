package server

import (
	"bytes"
	"testing"
)

// One writer holds at most maxLoanedBytes of chunks for inlined file parts, whatever the
// server's budget leaves: past it a part is refused (and goes with sendfile), the server's
// count moves with each chunk, and resetIov (after the write) gives every chunk back. The
// chunks hold the file's bytes at the parts' positions.
func TestWriterLoanLimit(t *testing.T) {
	content := randomContent(1 << 20)
	f := osFileWith(t, content)
	s := &Server{}
	w := &writer{c: &Conn{srv: s}, stats: &s.stats, buf: make([]byte, 0, writeBufSize), tail: -1}
	const part = inlineFileMax // too large for the write buffer: each takes a chunk
	perChunk := bufCap(part)
	fit := maxLoanedBytes / perChunk
	if fit < 1 || fit >= maxIov {
		t.Fatalf("%d chunks of %d bytes fit the writer's limit: the test needs 1 to %d", fit, perChunk, maxIov-1)
	}
	for i := range fit {
		if !w.inlineFile(f, int64(i*part), part) {
			t.Fatalf("part %d refused with %d of %d bytes loaned", i, w.loaned, maxLoanedBytes)
		}
	}
	if w.inlineFile(f, int64(fit*part), part) {
		t.Fatalf("part %d inlined past the writer's limit: %d bytes loaned, limit %d", fit, w.loaned, maxLoanedBytes)
	}
	if got := s.loaned.Load(); got != int64(fit*perChunk) || w.loaned != fit*perChunk {
		t.Fatalf("server counts %d loaned, writer %d; want %d", got, w.loaned, fit*perChunk)
	}
	// A part that fits the write buffer needs no chunk, and is still inlined.
	if !w.inlineFile(f, 0, copyMax) {
		t.Fatal("a part that fits the write buffer was refused with the chunks all loaned")
	}
	for i, b := range w.iov[:fit] {
		if !bytes.Equal(b, content[i*part:(i+1)*part]) {
			t.Fatalf("chunk %d does not hold the file's bytes at %d", i, i*part)
		}
	}
	w.resetIov()
	if got := s.loaned.Load(); got != 0 || w.loaned != 0 || len(w.loans) != 0 {
		t.Fatalf("after the write: server %d loaned, writer %d in %d chunks; want none", got, w.loaned, len(w.loans))
	}
}
