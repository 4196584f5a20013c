package client

// File reads: a consumer on the broker's host reads records from the broker's segment files.
//
// Over a unix socket to a broker that knows FetchShared (wire.FetchShared), a fetcher asks with
// it instead of Fetch. A partition with 64 KiB or more to read comes back as a span of a segment
// file (path, device and inode numbers, byte range, all below the high watermark) instead of
// bytes. The fetcher opens the file, checks with fstat that it is the file the broker meant
// (not a compacted segment renamed over it, nor a file of another mount namespace, nor a FIFO
// or a device whose open would block or act on it: openSpan), and from
// then on serves the partition from the file: readSpan reads twice max.partition.fetch.bytes
// at a time with pread (spanPieceFactor; max.partition.fetch.bytes where fetch.max.bytes
// leaves no room for that: spanPieceLocked), cuts each piece after its last whole batch, and
// queues it for Poll exactly as a fetch response's share for that partition. So a consumer catching up makes one round trip
// to the broker per span (up to fileSpanMaxBytes; a segment at most) instead of one per
// max.partition.fetch.bytes, and the broker neither wakes up nor copies for each piece: the
// wake-up per fetch was most of what held a consumer back (BENCHMARKS.md, Consume).
// A partition at the log's tail gets its few bytes inline, as by Fetch.
//
// Why a path and not a descriptor passed with SCM_RIGHTS: the client's connection reader would
// have to receive ancillary data with every read, and the server's writer to send it, for a
// gain only in the rare case the path check fails, when the consumer simply fetches again.
// The cost is that the consumer needs permission to read the broker's data directory; one that
// lacks it goes back to Fetch (fileReadsOff) after its first refusal.
//
// Every piece is checked as a fetched response is (whole batches, then every batch's CRC), so a
// file that changed under the span (truncated, replaced between the broker's answer and the
// open) shows up as a short read or a failed check, never as records the log does not hold: a
// short read drops the span and the partition is fetched again from the same offset. Poll
// checks the CRCs, except when it is well behind the reader: then the reader checks the piece
// it just read, while the piece is in its core's cache (readSpan's checkHere). Checking every
// piece on the reader made the reader the bottleneck (BENCHMARKS.md, Consume).

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
)

// fileSpanMaxBytes is the most a FetchShared asks one span to cover: a segment at most, in
// practice (spans never cross segment files), and nothing is transferred for it.
const fileSpanMaxBytes = 1 << 30

// maxSpanFailures is how many spans in a row may fail to open or read (the file was deleted or
// replaced between the broker's answer and the open: retention or compaction racing the
// consumer) before a fetcher pauses asking for spans (spanPause).
const maxSpanFailures = 3

// fileSpan is a partition's records still to be read from one of the broker's files. Its
// fields are guarded by Consumer.mu, and its position is also the reader's that holds its
// partition's in-flight mark (readSpan), which reads without the lock.
type fileSpan struct {
	file *os.File
	// src names the file as the broker did (its path, device and inode): a read checks that
	// the path still leads to it. Retention renames a segment's file *.deleted and unlinks it
	// only when the broker's last reader of it lets go, so the open file's link count alone
	// would let pieces of a deleted segment come for as long as the broker reads it (a scrub
	// pass, another consumer).
	src      wire.FileSpan
	pos, end int64  // what is left to read
	epoch    uint64 // the partition's epoch when the span was fetched
	offset   int64  // the fetch offset the next piece starts at
}

// canReadFiles reports whether this fetcher's new connection should ask with FetchShared: the
// consumer allows file reads, the connection is a unix socket, and the broker lists the api.
func (f *fetcher) canReadFiles(conn *Conn) bool {
	if conn.unix == nil || f.fileReadsOff.Load() || !f.c.cfg.fileReads() {
		return false
	}
	return conn.versions != nil && conn.supports(wire.FetchShared)
}

// spanPause is how long a fetcher whose spans kept failing (files deleted or replaced before
// it opened them, or shorter than named: retention racing a consumer at the log's start)
// fetches through the socket before it asks for spans again (a test sets another with
// fileReadHooks.spanPause).
const spanPause = 10 * time.Second

// fileReadHooks are the test seams of file reads, an option only this package's tests set
// (ConsumerConfig.hooks; nil in every other consumer): spanOpen runs as openSpan starts, and
// an error it returns is the open's (tests run as root, whom no permission stops, and need the
// errors a consumer meets elsewhere); spanRead runs as readSpan starts reading a piece (the
// partition's in-flight mark is held, Consumer.mu is not; atomics: tests set them while
// fetchers run); pause, if not 0, replaces spanPause.
type fileReadHooks struct {
	spanOpen atomic.Pointer[func(*wire.FileSpan) error]
	spanRead atomic.Pointer[func()]
	pause    time.Duration
}

// pauseFor is how long file reads pause after failed spans.
func (f *fetcher) pauseFor() time.Duration {
	if h := f.c.cfg.hooks; h != nil && h.pause > 0 {
		return h.pause
	}
	return spanPause
}

// fileReadsOn reports whether the fetcher asks for spans now.
func (f *fetcher) fileReadsOn() bool {
	return !f.fileReadsOff.Load() && time.Now().UnixNano() >= f.pausedUntil.Load()
}

// pauseFileReads makes the fetcher fetch through the socket for spanPause, after
// maxSpanFailures spans in a row failed.
func (f *fetcher) pauseFileReads(why string, err error) {
	f.spanFailures.Store(0)
	f.pausedUntil.Store(time.Now().Add(f.pauseFor()).UnixNano())
	f.c.cfg.Logger.Debug("sluice consumer: reading through the socket for a while", "broker", f.broker, "why", why, "err", err, "for", f.pauseFor())
}

// stopFileReads makes the fetcher fetch every record through the socket from now on.
func (f *fetcher) stopFileReads(why string, args ...any) {
	if f.fileReadsOff.CompareAndSwap(false, true) {
		f.c.cfg.Logger.Info("sluice consumer: reading records through the socket, not from the broker's files", append([]any{"broker", f.broker, "why", why}, args...)...)
	}
}

// openSpans opens the files of the last response's spans, before handle takes the consumer's
// lock: an open and an fstat are system calls. It opens only the spans handle may adopt: those
// matched, in order, to the first entry of a partition the request asked for, without an error
// code (handle's walk). So a broker that sends more spans than the request had partitions (a
// broken one, or a hostile one: a response may hold millions) costs at most one open per
// requested partition, never a descriptor per span. files[i] is Spans[i]'s, nil if not opened.
func (f *fetcher) openSpans() []*os.File {
	spans := f.resp.Spans
	if len(spans) == 0 {
		return nil
	}
	files := make([]*os.File, len(spans))
	seen := f.spanSeen[:0]
	for range f.sent {
		seen = append(seen, false)
	}
	f.spanSeen = seen
	part, next := -1, 0
	for ti := range f.resp.Topics {
		t := &f.resp.Topics[ti]
		for pi := range t.Partitions {
			if next == len(spans) {
				return files
			}
			p := &t.Partitions[pi]
			part++
			s := -1
			if spans[next].Index == int32(part) {
				s = next
				next++
			}
			i, ok := f.index[TopicPartition{t.Topic, p.Partition}]
			if !ok || seen[i] {
				continue // not asked for, or not the entry handle files
			}
			seen[i] = true
			if s < 0 || p.ErrorCode != wire.NoError {
				continue
			}
			file, err := openSpan(&spans[s], f.c.cfg.hooks)
			files[s] = file
			switch {
			case err == nil:
				f.spanFailures.Store(0)
			case errors.Is(err, fs.ErrPermission):
				f.stopFileReads("the broker's files cannot be opened", "err", err)
			default:
				f.c.cfg.Logger.Debug("sluice consumer: span not opened", "err", err)
				if f.spanFailures.Add(1) >= maxSpanFailures {
					f.pauseFileReads("spans kept failing to open", err)
				}
			}
		}
	}
	return files
}

// Errors of a span that cannot be read.
var (
	errOtherFile  = errors.New("client: a span's path leads to another file")
	errBadSpan    = errors.New("client: a span with a relative path, a negative position, no bytes, or an end past 2^63")
	errNotRegular = errors.New("client: a span's path leads to no regular file")
)

// openSpan opens a span's file read-only and checks that it is the broker's: a regular file
// with the span's device and inode numbers. The path is checked before the open as well as
// after it, and opened non-blocking: whatever a broker names, a FIFO (whose open waits for a
// writer, for ever) or a device (whose open may act on it) is not opened.
func openSpan(sp *wire.FileSpan, hooks *fileReadHooks) (*os.File, error) {
	if hooks != nil {
		if hook := hooks.spanOpen.Load(); hook != nil {
			if err := (*hook)(sp); err != nil {
				return nil, err
			}
		}
	}
	if sp.Pos < 0 || sp.Len <= 0 || sp.Pos > math.MaxInt64-int64(sp.Len) || !filepath.IsAbs(sp.Path) {
		return nil, errBadSpan
	}
	fi, err := os.Stat(sp.Path)
	if err != nil {
		return nil, err
	}
	if err := checkSpanFile(fi, sp); err != nil {
		return nil, err
	}
	file, err := os.OpenFile(sp.Path, os.O_RDONLY|spanOpenFlags, 0)
	if err != nil {
		return nil, err
	}
	fi, err = file.Stat()
	if err == nil {
		err = checkSpanFile(fi, sp)
	}
	if err == nil {
		err = setBlocking(file)
	}
	if err != nil {
		_ = file.Close()
		return nil, err
	}
	return file, nil
}

// checkSpanFile reports whether fi is a regular file with sp's device and inode numbers.
func checkSpanFile(fi fs.FileInfo, sp *wire.FileSpan) error {
	if !fi.Mode().IsRegular() {
		return errNotRegular
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || uint64(st.Dev) != sp.Dev || uint64(st.Ino) != sp.Ino { //nolint:unconvert // Dev is int32 on darwin
		return errOtherFile
	}
	return nil
}

// closeUnused closes the span files handle did not adopt.
func closeUnused(files []*os.File) {
	for _, file := range files {
		if file != nil {
			_ = file.Close()
		}
	}
}

// closeSpans drops every span (the fetcher is stopping).
func (f *fetcher) closeSpans() {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	for tp := range f.spans {
		f.dropSpan(tp)
	}
}

// readFiles reads the next piece of a span for Poll itself, when nothing is queued, and reports
// whether it read one. The fetcher that holds the span reads ahead while it runs, but it may be
// asleep: on this project's 2-vCPU virtual machine, waking a sleeping thread took longer than
// reading a piece, and Poll waited for the wake-up in turn (BENCHMARKS.md, Consume).
// Called by Poll only (pollMu held, c.mu not).
func (c *Consumer) readFiles() bool {
	c.mu.Lock()
	fs := c.spanFetchers[:0]
	for _, f := range c.mu.fetchers {
		if len(f.spans) > 0 {
			fs = append(fs, f)
		}
	}
	c.spanFetchers = fs
	c.mu.Unlock()
	for i, f := range fs {
		fs[i] = nil
		if f.readSpan(true) {
			return true
		}
	}
	return false
}

// dropSpan closes tp's span; its partition is fetched again from where the span stopped.
// c.mu must be held.
func (f *fetcher) dropSpan(tp TopicPartition) {
	if sp := f.spans[tp]; sp != nil {
		_ = sp.file.Close()
		delete(f.spans, tp)
	}
	if ps := f.c.mu.parts[tp]; ps != nil {
		ps.spanAhead = 0
	}
}

// dropSpanIf drops tp's span if it is still sp, not a span fetched since for the partition
// assigned again (sp was closed when it was replaced). c.mu must be held.
func (f *fetcher) dropSpanIf(tp TopicPartition, sp *fileSpan) {
	if f.spans[tp] == sp {
		f.dropSpan(tp)
	}
}

// maxSpanAhead is the most pieces of one partition's span that may wait for Poll: the fetcher
// reads half of them per wake-up.
const maxSpanAhead = 4

// spanPieceFactor: a span is read in pieces of this many times max.partition.fetch.bytes, and
// half as many of them may wait (maxSpanAhead), so what a partition holds ahead is the same
// 8 × max.partition.fetch.bytes as with pieces of one. Each piece is a pread, a queued chunk
// and a hand-over between the fetcher and Poll: pieces of 2 MiB read at 6,440 MB/s against
// 5,560 for 1 MiB (medians), ahead in 8 of 8 alternated pairs, for less CPU; 4 MiB pieces,
// two ahead, were behind 2 MiB in 5 of 6, and 2 MiB pieces with twice the memory ahead no
// different (BENCHMARKS.md, Consume).
const spanPieceFactor = 2

// spanPieceLocked is the size of the pieces the fetcher reads its spans in: spanPieceFactor ×
// max.partition.fetch.bytes where fetch.max.bytes, shared among its spans, holds responsesAhead
// such pieces for each; else max.partition.fetch.bytes, a fetched response's share. So the
// larger pieces never take a partition past its share of fetch.max.bytes, nor past what it
// would hold when fetched (responsesAhead responses), where the share is smaller than that:
// with fetch.max.bytes at max.partition.fetch.bytes, or a fetcher reading many partitions'
// spans (13 with the defaults), the pieces and the memory ahead are those of 1× pieces. c.mu
// must be held.
func (f *fetcher) spanPieceLocked() int64 {
	c := f.c
	piece := int64(c.cfg.MaxPartitionFetchBytes)
	if share := int64(c.cfg.FetchMaxBytes) / int64(max(1, len(f.spans))); share >= responsesAhead*spanPieceFactor*piece {
		piece *= spanPieceFactor
	}
	return piece
}

// spanAheadLocked is how many pieces a partition read from a file may have waiting for Poll:
// up to maxSpanAhead, within fetch.max.bytes over all of the fetcher's spans, and never fewer
// than a fetched partition's responsesAhead. It sizes the buffers the fetcher keeps. c.mu
// must be held.
func (f *fetcher) spanAheadLocked() int {
	c := f.c
	n := int(int64(c.cfg.FetchMaxBytes) / f.spanPieceLocked() / int64(max(1, len(f.spans))))
	n = min(max(n, responsesAhead), maxSpanAhead)
	f.spanBufs = max(f.spanBufs, min(len(f.spans)*(n+2), 64))
	return n
}

// spanCurrent reports whether sp still serves ps: the partition was not sought, unassigned or
// moved to another leader since. c.mu must be held.
func (f *fetcher) spanCurrent(sp *fileSpan, ps *partState) bool {
	return ps != nil && ps.epoch == sp.epoch && ps.fetchOffset == sp.offset && ps.leader == f.broker
}

// readSpan reads the next piece of one span whose partition may be fetched, queues it for
// Poll, and reports whether it found one to read. It drops the spans of partitions that were
// sought, unassigned or moved since their span was fetched. The fetcher goroutine and Poll
// (readFiles, byPoll) both call it; the partition's in-flight mark gives one of them the span's
// file position until the piece is queued.
func (f *fetcher) readSpan(byPoll bool) bool {
	c := f.c
	c.mu.Lock()
	var tp TopicPartition
	var sp *fileSpan
	var ps *partState
	for t, s := range f.spans {
		p := c.mu.parts[t]
		if !f.spanCurrent(s, p) {
			f.dropSpan(t)
			continue
		}
		if p.fetchable(f.broker) {
			tp, sp, ps = t, s, p
			break
		}
	}
	if sp == nil {
		c.mu.Unlock()
		return false
	}
	ps.inflight, ps.spanRead = true, true
	// Poll is well behind (half the pieces a span may have waiting are there): this goroutine
	// checks the batches of the piece it reads, while they are in this core's cache, and Poll
	// skips them (chunk.validated). A hot CRC-32C runs at twice the speed of Poll's, on bytes
	// read on the other core. Checking every piece here made this goroutine the slower one
	// (3,994 against 4,482 MB/s); checking only when Poll is this far behind: 5,230 against
	// 4,680 MB/s, ahead in 8 of 10 pairs (BENCHMARKS.md, Consume).
	checkHere := ps.buffered >= maxSpanAhead/2
	piece := int(min(f.spanPieceLocked(), sp.end-sp.pos))
	var fb *fetchBuf
	if c.bufs != nil {
		fb = f.takeBufLocked(piece)
	}
	epoch, offset := ps.epoch, sp.offset
	c.mu.Unlock()

	if h := c.cfg.hooks; h != nil {
		if hook := h.spanRead.Load(); hook != nil {
			(*hook)()
		}
	}
	var buf []byte
	if fb != nil {
		buf = fb.b[:0]
	}
	records, err := sp.read(buf, piece)
	if fb != nil {
		fb.b = records
	}
	c.fileReads.Add(1)
	c.fileReadBytes.Add(int64(len(records)))
	whole, next, count, cerr := wholeBatches(records)
	validated := 0
	if checkHere {
		validated = validatedPrefix(whole)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	// The in-flight mark is this read's as long as ps is the partition's state: a seek keeps
	// it (and changes the epoch); an unassignment replaces ps.
	if now := c.mu.parts[tp]; now == ps {
		ps.inflight = false
	}
	ps.spanRead = false
	current := c.mu.parts[tp] == ps && ps.epoch == epoch
	switch {
	case err != nil || len(whole) == 0 && cerr == nil:
		// Short (the file shrank), unreadable, gone, or the span ends in a partial batch: the
		// partition is fetched again from here.
		if current && err != nil && err != errUnlinked {
			c.cfg.Logger.Debug("sluice consumer: span read failed", "partition", tp.String(), "err", err)
			if f.spanFailures.Add(1) >= maxSpanFailures {
				f.pauseFileReads("spans kept reading short", err)
			}
		}
		f.dropSpanIf(tp, sp)
		current = false
	case !current:
		f.dropSpanIf(tp, sp) // sought or unassigned while the piece was read
	}
	if !current {
		if fb != nil {
			f.putBufLocked(fb)
		}
		if now := c.mu.parts[tp]; now != nil {
			// Nothing was queued, so no Poll will wake the partition's fetcher, which may
			// have passed over the partition while this read held its in-flight mark (Poll's
			// readFiles reading as the partition was sought) and gone to sleep: it must fetch
			// from here (or from the new position).
			c.wakeFetcherLocked(now)
		}
		return true
	}
	ch := c.newChunkLocked()
	ch.tp, ch.epoch, ch.fetchOffset = tp, epoch, offset
	if cerr != nil {
		cerr = fmt.Errorf("client: read %s from the broker's file: %w", tp, cerr)
	}
	ch.records, ch.rest, ch.nextOffset, ch.count, ch.err = whole, whole, next, count, cerr
	ch.validated = validated
	if fb != nil && len(whole) > 0 {
		ch.buf = fb
		fb.refs++
	} else if fb != nil {
		f.putBufLocked(fb)
	}
	if next > ps.fetchOffset {
		ps.fetchOffset = next
	}
	ps.buffered++
	if cerr != nil {
		ps.stopAhead = true
		f.dropSpanIf(tp, sp)
	} else if sp.pos += int64(len(whole)); sp.pos >= sp.end {
		f.dropSpanIf(tp, sp)
	} else {
		sp.offset = ps.fetchOffset
	}
	c.mu.queue = append(c.mu.queue, ch)
	c.signal()
	if byPoll && ps.fetchable(f.broker) {
		// The fetcher may have looked for a piece to read while this read held the
		// partition's in-flight mark, found none and gone to sleep; Poll wakes it only once
		// half the pieces or fewer wait, so it would read no further until then.
		c.wakeFetcherLocked(ps)
	}
	return true
}

// errUnlinked: a span's file lost its name before the span was read to its end.
var errUnlinked = errors.New("client: the span's file was deleted or replaced")

// read reads the span's next piece of n bytes into buf (grown if needed), and more if the
// piece holds no whole batch but the span holds the batch it starts. It returns an error if
// the file reads short, or if it has been deleted or replaced: the open file would still read,
// but the records are gone from the log (retention or compaction ran), and a consumer must
// learn it as from a fetch, with OFFSET_OUT_OF_RANGE or the compacted records.
func (sp *fileSpan) read(buf []byte, n int) ([]byte, error) {
	if unlinked(sp.file) || sp.renamed() {
		return buf[:0], errUnlinked
	}
	// A piece must hold a batch header to tell a batch's size: with a max.partition.fetch.bytes
	// below that, the first batch is read whole, as a fetch returns it.
	n = int(min(max(int64(n), batch.HeaderSize), sp.end-sp.pos))
	for {
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		m, err := sp.file.ReadAt(buf, sp.pos)
		if m < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf[:m], err
		}
		size, serr := batch.SizeOf(buf)
		if serr != nil || size <= n || int64(size) > sp.end-sp.pos {
			// Whole batches, a damaged header (Poll's check reports it), or a batch that the
			// span ends in the middle of.
			return buf, nil
		}
		n = size // one batch larger than a piece: read it whole
	}
}

// renamed reports whether the span's path no longer leads to its file (one stat per piece).
func (sp *fileSpan) renamed() bool {
	if sp.src.Path == "" { // a span made without a name (tests)
		return false
	}
	fi, err := os.Stat(sp.src.Path)
	return err != nil || checkSpanFile(fi, &sp.src) != nil
}

// validatedPrefix returns how many bytes of whole (whole batches) lie in the leading batches
// that pass batch.Validate. It stops at the first that does not: Poll checks that one again and
// reports it in its place, after the records before it.
func validatedPrefix(whole []byte) int {
	n := 0
	for rest := whole; len(rest) > 0; {
		b, r, err := batch.Next(rest)
		if err != nil || b.Validate() != nil {
			break
		}
		n += len(b)
		rest = r
	}
	return n
}
