package client

// FetchShared responses for the fetcher fuzz harness (fetch_fuzz_test.go): partitions whose
// records come as spans of files the test writes, as a broker's segment files, with the ways
// a broken or hostile broker (or a log changing under the consumer) can get a span wrong.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// fzSpanFile is a file the test wrote for a span, and the batches in it (by id, with their
// byte ranges as built).
type fzSpanFile struct {
	path    string
	batches []fzFileBatch
}

type fzFileBatch struct {
	id         uint32
	start, end int64
}

// fzFiller is what lies between the batches of a span file: no batch length (a length field
// of 0xa5a5a5a5 is negative), so a read that starts in it finds a damaged header.
const fzFiller = 0xa5

// fzSpans turns some of the response's entries into spans: an entry's records go into a file
// of their own, between other batches of the partition that lie outside the span (a client
// that read outside it would return their records, which the test marks as damaged), and the
// entry carries no records (or, rarely, records of its own, which handle must ignore if it
// adopts the span). Most spans are sound; the others name another file (inode or device), a
// missing path, a directory, a FIFO, a relative path, or a range that starts or ends past the
// file, in the middle of a batch, or at absurd positions. Their indexes are then rarely
// shuffled, duplicated or made up. Entry i is the response's partition i.
func (h *fzHarness) fzSpans(r *fzReader, entries []fzEntry) []wire.FileSpan {
	var spans []wire.FileSpan
	for i := range entries {
		e := &entries[i]
		if e.p.ErrorCode != wire.NoError && !r.rare(8) || e.p.ErrorCode == wire.NoError && r.rare(6) {
			continue // records inline (or none: an error code)
		}
		sf := &fzSpanFile{path: filepath.Join(h.dir, fmt.Sprintf("%020d.log", len(h.spanFiles)))}
		h.spanFiles = append(h.spanFiles, sf)
		var content []byte
		// traps adds batches of the partition that the span must not cover, and filler.
		traps := func() {
			if r.rare(3) {
				recs, _, ids, ends := h.fzBuildRecordsTraced(r, e.p.Partition, e.from)
				at := int64(len(content))
				for k, id := range ids {
					sf.batches = append(sf.batches, fzFileBatch{id, at + int64(fzEnd(ends, k-1)), at + int64(ends[k])})
				}
				content = append(content, recs...)
			}
			for range r.intn(80) {
				content = append(content, fzFiller)
			}
		}
		traps()
		pos, n := int64(len(content)), int64(len(e.p.Records))
		for k, id := range e.ids {
			sf.batches = append(sf.batches, fzFileBatch{id, pos + int64(fzEnd(e.ends, k-1)), pos + int64(e.ends[k])})
		}
		content = append(content, e.p.Records...)
		traps()
		if err := os.WriteFile(sf.path, content, 0o644); err != nil {
			h.t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(sf.path, &st); err != nil {
			h.t.Fatal(err)
		}
		sp := wire.FileSpan{Index: int32(i), Path: sf.path, Dev: uint64(st.Dev), Ino: uint64(st.Ino), Pos: pos, Len: int32(n)} //nolint:unconvert // Dev is int32 on darwin
		switch r.pick(16) {
		case 0: // another file
			sp.Ino ^= 1 + uint64(r.intn(4))
		case 1:
			sp.Dev ^= 1 + uint64(r.intn(4))
		case 2: // gone
			sp.Path += ".deleted"
		case 3: // a directory
			sp.Path = h.dir
			sp.Dev, sp.Ino = fzStatID(h, h.dir)
		case 4: // a FIFO: its open must not wait for a writer
			fifo := sf.path + ".fifo"
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				h.t.Fatal(err)
			}
			sp.Path = fifo
			sp.Dev, sp.Ino = fzStatID(h, fifo)
		case 5: // relative
			if wd, err := os.Getwd(); err == nil {
				if rel, err := filepath.Rel(wd, sf.path); err == nil {
					sp.Path = rel
				}
			}
		case 6: // past the end of the file (truncated since the broker answered), or far past
			if r.bool() {
				sp.Len = int32(min(int64(math.MaxInt32), n+1+int64(r.intn(4096))))
			} else {
				sp.Len = math.MaxInt32 - int32(r.intn(4))
			}
		case 7: // starting past the file, far past it, or before its start
			switch r.intn(3) {
			case 0:
				sp.Pos = int64(len(content)) + int64(r.intn(64))
			case 1:
				sp.Pos = math.MaxInt64 - int64(r.intn(int(n)+8))
			default:
				sp.Pos = -1 - int64(r.intn(8))
			}
		case 8: // ending early: in the middle of a batch, or anywhere
			sp.Len = int32(r.intn(int(n) + 1))
		case 9: // starting elsewhere: in the filler, inside a batch, in the traps
			sp.Pos = max(0, pos+int64(r.intn(161))-80)
			sp.Len = int32(max(0, int64(r.intn(len(content)+1))-(sp.Pos-pos)))
		case 10: // no bytes, or a negative length
			sp.Len = -int32(r.intn(3))
		}
		// What the span covers may be returned; every other batch must not.
		for _, b := range sf.batches {
			if !(sp.Pos >= 0 && b.start >= sp.Pos && b.end-sp.Pos <= int64(sp.Len)) {
				bi := h.batches[b.id]
				bi.corrupt = true
				h.batches[b.id] = bi
			}
		}
		if e.ids == nil || !r.rare(8) {
			e.p.Records = nil
		} else { // records inline as well, other than the file's (used if handle ignores the span)
			e.p.Records, _ = h.fzBuildRecords(r, e.p.Partition, e.from)
		}
		e.fail = "" // a span that fails to open or read is fetched again: no failure is owed
		spans = append(spans, sp)
	}
	if len(spans) > 1 && r.rare(8) { // out of order
		i, j := r.intn(len(spans)), r.intn(len(spans))
		spans[i], spans[j] = spans[j], spans[i]
	}
	// otherIndex is an index other than a span's own: none of the response's partitions, or
	// another entry of the span's partition. (An entry of another partition would be a lie no
	// client can catch: batches do not name their partition.) The entry it names may now be
	// read from the span instead of its own records, so it owes no failure.
	otherIndex := func(sp wire.FileSpan) int32 {
		cands := []int32{-1, int32(len(entries)), int32(len(entries)) + 1, math.MaxInt32, math.MinInt32}
		for j := range entries {
			if entries[j].p.Partition == entries[sp.Index].p.Partition {
				cands = append(cands, int32(j))
			}
		}
		k := cands[r.intn(len(cands))]
		if k >= 0 && int(k) < len(entries) {
			entries[k].fail = ""
		}
		return k
	}
	if len(spans) > 0 && r.rare(8) { // a duplicate, maybe with another index
		sp := spans[r.intn(len(spans))]
		if r.bool() {
			sp.Index = otherIndex(sp)
		}
		at := r.intn(len(spans) + 1)
		spans = append(spans[:at], append([]wire.FileSpan{sp}, spans[at:]...)...)
	}
	if len(spans) > 0 && r.rare(8) { // a made-up index
		sp := &spans[r.intn(len(spans))]
		if sp.Index >= 0 && int(sp.Index) < len(entries) {
			sp.Index = otherIndex(*sp)
		}
	}
	if len(spans) > 0 && r.rare(16) { // many spans for one partition: one open at most
		sp := spans[r.intn(len(spans))]
		for range 64 {
			spans = append(spans, sp)
		}
	}
	return spans
}

// fzEnd is ends[k], or 0 for k = -1.
func fzEnd(ends []int, k int) int {
	if k < 0 {
		return 0
	}
	return ends[k]
}

func fzStatID(h *fzHarness, path string) (dev, ino uint64) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		h.t.Fatal(err)
	}
	return uint64(st.Dev), uint64(st.Ino) //nolint:unconvert // Dev is int32 on darwin
}

// changeFile plays the log changing under a span the consumer may hold: the file deleted
// (retention), replaced by another (compaction), truncated, or a bit flipped inside a batch's
// CRC cover (a disk error). A flipped batch read before the flip was returned intact; one
// read after it fails its check.
func (h *fzHarness) changeFile(r *fzReader) {
	if len(h.spanFiles) == 0 {
		return
	}
	sf := h.spanFiles[r.intn(len(h.spanFiles))]
	if h.trace {
		h.t.Logf("change %s", sf.path)
	}
	switch r.intn(4) {
	case 0:
		_ = os.Remove(sf.path)
	case 1:
		tmp := sf.path + ".new"
		if err := os.WriteFile(tmp, []byte("replaced"), 0o644); err == nil {
			_ = os.Rename(tmp, sf.path)
		}
	case 2:
		if fi, err := os.Stat(sf.path); err == nil {
			_ = os.Truncate(sf.path, int64(r.intn(int(fi.Size())+1)))
		}
	default:
		if len(sf.batches) == 0 {
			return
		}
		b := sf.batches[r.intn(len(sf.batches))]
		const crcField = 17
		if b.end-b.start <= crcField {
			return
		}
		at := b.start + crcField + int64(r.intn(int(b.end-b.start-crcField)))
		file, err := os.OpenFile(sf.path, os.O_RDWR, 0)
		if err != nil {
			return
		}
		defer file.Close()
		var one [1]byte
		if m, _ := file.ReadAt(one[:], at); m == 1 {
			one[0] ^= 1 << r.intn(8)
			_, _ = file.WriteAt(one[:], at)
		}
	}
}

// fzOpenFiles counts the process's open descriptors, or -1 where it cannot tell.
func fzOpenFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// FuzzConsumerFetchSharedResponse is FuzzConsumerFetchResponse with FetchShared responses:
// partitions come back as spans of files (fzSpans), read by the fetcher (readSpan, a step of
// its own here) and by Poll (readFiles) a piece (spanPieceLocked) at a time, while
// the files may be deleted, replaced, truncated or damaged (changeFile). On top of
// FuzzConsumerFetchResponse's checks: no hang on a span of a FIFO, no record from a batch
// outside its span (the consumer reads nothing outside it), none from a damaged batch, and
// no descriptor left open once the consumer is closed.
func FuzzConsumerFetchSharedResponse(f *testing.F) {
	addFetchSeeds(f, 2246822519, 7)
	// The runtime's poller opens descriptors of its own with the first pollable file: not a
	// leak of the first iteration.
	if pr, pw, err := os.Pipe(); err == nil {
		pr.Close()
		pw.Close()
	}
	f.Fuzz(func(t *testing.T, reuse bool, data []byte) {
		defer fzWatchdog(10 * time.Second)()
		fds := fzOpenFiles()
		r := &fzReader{b: data}
		maxPart := 1 + r.intn(700)
		cfg := ConsumerConfig{
			ReuseRecordBuffers:     reuse,
			MaxPollRecords:         1 + r.intn(8),
			AutoOffsetReset:        []string{OffsetResetEarliest, OffsetResetLatest, OffsetResetNone}[r.intn(3)],
			MaxDecompressed:        1 << 16,
			MaxPartitionFetchBytes: maxPart,
			FetchMaxBytes:          maxPart * (1 + r.intn(12)),
		}
		parts := int32(1 + r.intn(3))
		starts := []int64{int64(r.intn(20)), int64(r.intn(20)), int64(r.intn(20))}
		h := newFzHarness(t, cfg, parts, starts)
		h.shared, h.dir = true, t.TempDir()
		h.batches = map[uint32]fzBatchInfo{}
		func() {
			defer h.close()
			for step := 0; step < 24 && !r.empty(); step++ {
				switch op := r.intn(16); {
				case op < 5:
					h.fetchRound(r, nil)
				case op < 9:
					if h.busy() || r.rare(4) { // an idle Poll reads spans, or waits out its context
						h.poll(fmt.Sprintf("step %d poll", step))
					}
				case op < 11: // the fetcher reads ahead
					h.f.readSpan(false)
					h.checkState(fmt.Sprintf("step %d read", step))
				case op == 11:
					h.changeFile(r)
				case op == 12:
					p := int32(r.intn(int(parts)))
					h.seek(p, r.offset(h.position(p)))
					h.checkState("after a seek")
				case op == 13:
					p := int32(r.intn(int(parts)))
					h.reassign(p, r.offset(h.position(p)))
					h.checkState("after a reassignment")
				default:
					h.failedFetch()
				}
			}
			h.finish()
		}()
		h.c.mu.Lock()
		left := len(h.f.spans)
		h.c.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d spans left open after Close", left)
		}
		if now := fzOpenFiles(); fds >= 0 && now > fds {
			t.Fatalf("%d descriptors open after the iteration, %d before", now, fds)
		}
	})
}

// A response with more spans than the request had partitions (here a thousand entries of the
// one partition asked for, and of one not asked for, each with a span of a good file) costs
// one open: each descriptor is held until handle, so a span per entry would let a broker
// exhaust the process's descriptors.
func TestOpenSpansOpensOnePerPartition(t *testing.T) {
	h := newFzHarness(t, ConsumerConfig{}, 1, []int64{0})
	defer h.close()
	h.leaders()
	if sent := h.prepare(); len(sent) != 1 {
		t.Fatalf("request of %d partitions", len(sent))
	}
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(path, fzRawBatches(0, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	dev, ino := fzStatID(h, path)
	var resp wire.FetchSharedResponse
	topic := wire.FetchResponseTopic{Topic: fzTopic}
	for i := range 2000 {
		topic.Partitions = append(topic.Partitions, wire.FetchResponsePartition{Partition: int32(i % 2)})
		resp.Spans = append(resp.Spans, wire.FileSpan{Index: int32(i), Path: path, Dev: dev, Ino: ino, Len: 10})
	}
	resp.Topics = []wire.FetchResponseTopic{topic}
	h.f.resp = resp
	files := h.f.openSpans()
	opened := 0
	for i, file := range files {
		if file != nil {
			opened++
			if i != 0 {
				t.Errorf("span %d opened: only the first entry's is handle's", i)
			}
		}
	}
	closeUnused(files)
	h.f.release(false)
	if opened != 1 {
		t.Fatalf("%d spans opened, want 1", opened)
	}
}
