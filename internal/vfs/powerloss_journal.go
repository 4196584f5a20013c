package vfs

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"sync"
)

// The power-loss journal: a header, then records back to back, each written with one
// write(2) and never fsynced (a kill keeps the page cache; only the process dies).
//
//	header  "SLPLJ" 0 0 1                                     8 bytes
//	record  | body length u32 | CRC-32C of body u32 | body |  big-endian
//	body    | type u8 | node id uvarint | fields by type |
//
//	open    ino uvarint, durable size uvarint, path       a file tracked from here: durable up to size
//	sync    size uvarint                                  durable up to size; pre-images void
//	pre     offset uvarint, bytes                         the durable bytes at offset before an overwrite
//	shadow  -                                             durable contents in JOURNAL.shadow.ID from here
//	rename  path                                          the file is now at path
//	remove  -                                             the file is gone
//
// A record cut short by the kill (a short write, or a body whose CRC fails) ends the journal:
// the operation it records had not returned.
const journalHeader = "SLPLJ\x00\x00\x01"

const (
	recOpenType byte = iota + 1
	recSyncType
	recPreType
	recShadow
	recRenameType
	recRemove
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrBadJournal is returned by RollBack for a file that is not a power-loss journal.
var ErrBadJournal = errors.New("vfs: not a power-loss journal")

// journal is the open journal file. Records are appended under mu, one write each, so their
// order is the order in which their operations were decided.
type journal struct {
	path     string
	minLimit int64 // journalLimitMin; tests make it small
	mu       struct {
		sync.Mutex
		f     *os.File
		size  int64
		limit int64
	}
}

func (j *journal) open(path string) error {
	f, err := createJournal(path, nil)
	if err != nil {
		return err
	}
	j.path, j.minLimit = path, journalLimitMin
	j.mu.f, j.mu.size, j.mu.limit = f, int64(len(journalHeader)), journalLimitMin
	return nil
}

// createJournal creates (or truncates) path holding the header and body, open for appends.
func createJournal(path string, body []byte) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("vfs: power-loss journal: %w", err)
	}
	if _, err := f.Write(append([]byte(journalHeader), body...)); err != nil {
		f.Close()
		return nil, fmt.Errorf("vfs: power-loss journal: %w", err)
	}
	return f, nil
}

// append writes rec; over reports that the journal has grown past its bound.
func (j *journal) append(rec []byte) (over bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.mu.f == nil {
		return false, os.ErrClosed
	}
	if _, err := j.mu.f.Write(rec); err != nil {
		return false, err
	}
	j.mu.size += int64(len(rec))
	return j.mu.size > j.mu.limit, nil
}

// replace makes body (records) the whole journal, atomically: written beside it and renamed
// over it, so that a kill at any point leaves the old journal or the new one.
func (j *journal) replace(body []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.mu.f == nil {
		return os.ErrClosed
	}
	tmp := j.path + ".tmp"
	f, err := createJournal(tmp, body)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, j.path); err != nil {
		f.Close()
		return fmt.Errorf("vfs: power-loss journal: %w", err)
	}
	j.mu.f.Close()
	j.mu.f = f
	j.mu.size = int64(len(journalHeader) + len(body))
	j.mu.limit = max(j.minLimit, 4*j.mu.size)
	return nil
}

func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.mu.f == nil {
		return nil
	}
	err := j.mu.f.Close()
	j.mu.f = nil
	return err
}

// JournalSize is the journal's size in bytes (for tests and logs).
func (p *PowerLossFS) JournalSize() int64 {
	p.j.mu.Lock()
	defer p.j.mu.Unlock()
	return p.j.mu.size
}

// maybeCompact compacts the journal if a record took it past its bound. Called with no lock
// held, at the end of the operation that wrote the record.
func (p *PowerLossFS) maybeCompact() {
	if !p.compactSoon.Load() || !p.compacting.CompareAndSwap(false, true) {
		return
	}
	defer p.compacting.Store(false)
	p.compactSoon.Store(false)
	_ = p.compact() // a failed compaction leaves the old journal, still whole; tried again later
}

// compact rewrites the journal as the current durable state of every tracked file: an open
// record each, with its pre-images or its shadow.
func (p *PowerLossFS) compact() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	nodes := make([]*plNode, 0, len(p.mu.nodes))
	for _, n := range p.mu.nodes {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b *plNode) int { return cmp.Compare(a.id, b.id) })
	var body []byte
	for _, n := range nodes {
		n.mu.Lock()
		defer n.mu.Unlock()
		body = recOpen(body, n.id, n.ino, n.mu.synced, n.mu.path)
		if n.mu.shadow != nil {
			body = recID(body, recShadow, n.id)
			continue
		}
		for _, pi := range n.mu.pre {
			body = recPre(body, n.id, pi.off, pi.data)
		}
	}
	return p.j.replace(body)
}

// Record encoders: each appends one framed record to dst.

func recBegin(dst []byte, typ byte, id uint64) ([]byte, int) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, typ)
	return binary.AppendUvarint(dst, id), start
}

func recEnd(dst []byte, start int) []byte {
	body := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, crcTable))
	return dst
}

func recOpen(dst []byte, id, ino uint64, size int64, path string) []byte {
	dst, start := recBegin(dst, recOpenType, id)
	dst = binary.AppendUvarint(dst, ino)
	dst = binary.AppendUvarint(dst, uint64(size))
	return recEnd(append(dst, path...), start)
}

func recSync(dst []byte, id uint64, size int64) []byte {
	dst, start := recBegin(dst, recSyncType, id)
	return recEnd(binary.AppendUvarint(dst, uint64(size)), start)
}

func recPre(dst []byte, id uint64, off int64, data []byte) []byte {
	dst, start := recBegin(dst, recPreType, id)
	dst = binary.AppendUvarint(dst, uint64(off))
	return recEnd(append(dst, data...), start)
}

func recRename(dst []byte, id uint64, path string) []byte {
	dst, start := recBegin(dst, recRenameType, id)
	return recEnd(append(dst, path...), start)
}

func recID(dst []byte, typ byte, id uint64) []byte {
	dst, start := recBegin(dst, typ, id)
	return recEnd(dst, start)
}

// rbFile is a file's durable state as RollBack reads it from the journal.
type rbFile struct {
	id     uint64
	ino    uint64
	path   string
	synced int64
	pre    []preImage
	shadow bool
}

// readJournal replays the journal's records into the durable state of each file still
// tracked at its end.
func readJournal(data []byte) (map[uint64]*rbFile, error) {
	if len(data) < len(journalHeader) || string(data[:len(journalHeader)]) != journalHeader {
		return nil, ErrBadJournal
	}
	files := map[uint64]*rbFile{}
	for b := data[len(journalHeader):]; len(b) >= 8; {
		n := int(binary.BigEndian.Uint32(b))
		if n < 1 || len(b)-8 < n {
			break // cut short by the kill
		}
		body := b[8 : 8+n]
		if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(b[4:]) {
			break
		}
		b = b[8+n:]
		typ := body[0]
		id, k := binary.Uvarint(body[1:])
		if k <= 0 {
			break
		}
		rest := body[1+k:]
		f := files[id]
		if f == nil && typ != recOpenType {
			continue // a record of a file removed and forgotten (or never opened): nothing to do
		}
		switch typ {
		case recOpenType:
			ino, k1 := binary.Uvarint(rest)
			if k1 <= 0 {
				return files, nil
			}
			size, k2 := binary.Uvarint(rest[k1:])
			if k2 <= 0 {
				return files, nil
			}
			files[id] = &rbFile{id: id, ino: ino, synced: int64(size), path: string(rest[k1+k2:])}
		case recSyncType:
			size, k1 := binary.Uvarint(rest)
			if k1 <= 0 {
				return files, nil
			}
			f.synced, f.pre, f.shadow = int64(size), nil, false
		case recPreType:
			off, k1 := binary.Uvarint(rest)
			if k1 <= 0 {
				return files, nil
			}
			f.pre = append(f.pre, preImage{off: int64(off), data: rest[k1:]})
		case recShadow:
			f.shadow, f.pre = true, nil
		case recRenameType:
			f.path = string(rest)
		case recRemove:
			delete(files, id)
		}
	}
	return files, nil
}
