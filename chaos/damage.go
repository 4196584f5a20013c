package chaos

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DamageKind is one way of damaging a stopped broker's files.
type DamageKind string

const (
	DamageTruncateTail DamageKind = "truncate-tail" // cut a segment's last bytes (a torn append)
	DamageFlipBits     DamageKind = "flip-bits"     // flip bits in a segment's record data
	DamageZeroPage     DamageKind = "zero-page"     // zero a 4 KiB page of a segment
	DamageDeleteIndex  DamageKind = "delete-index"  // remove a segment's offset or time index
	// DamageBitRot flips bits in bytes the log's recovery point vouches for (trusted at open,
	// so found only by the scrub or a reader's CRC check): the bitrot fault, outside the
	// default kinds because nothing repairs such a replica yet (it stays in the ISR with a
	// corrupt batch, which the replica comparison reports as divergent).
	DamageBitRot DamageKind = "bit-rot"
)

// DamageKinds are the kinds the damage fault cycles through. They damage only what a restart's
// recovery reads again (past the partition's recovery point), as a crash in the middle of
// writing would, so that a recovering broker can find it.
var DamageKinds = []DamageKind{DamageTruncateTail, DamageFlipBits, DamageZeroPage, DamageDeleteIndex}

// Where Damage aims (segment/doc.go has the layout).
const (
	damagePage       = 4096 // zero-page's unit, and the most truncate-tail cuts
	damageSkipHeader = 61   // flip-bits spares the first batch's header (batch.HeaderSize)
	damageFlipSpan   = 64   // flip-bits' bits fall in a range of at most this many bytes
	damageMaxFlips   = 8
)

// damageSegment is one segment of a partition directory, as Damage sees it.
type damageSegment struct {
	dir    string // <dataDir>/<topic>-<partition>
	base   string // the 20-digit base offset
	size   int64  // the .log file's size
	rescan int64  // the first byte an open's recovery reads again (size: none, the recovery point vouches for all)
	last   bool   // the partition's active (last) segment
	hasIdx []string
}

func (s damageSegment) log() string { return filepath.Join(s.dir, s.base+".log") }

// name is the segment's log file relative to the data directory, for the description.
func (s damageSegment) name(suffix string) string {
	return filepath.Base(s.dir) + "/" + s.base + suffix
}

// Damage damages the files under dataDir (a stopped broker's log.dirs) in the way kind names,
// choosing the partition, segment and place with rng among the chaos topics' partitions
// (topics), and returns what it did, for the history ("flip-bits: chaos-1-3/00000000000000000000.log
// byte 81234 bit 5"). It does nothing, saying so, when there is nothing of that kind to damage.
//
//   - truncate-tail cuts 1 to min(4096, size) bytes from the end of a partition's last
//     segment's log;
//   - flip-bits flips 1 to 8 distinct bits within 64 bytes of a segment's log, past its first
//     61 bytes (the first batch's header) and past the partition's recovery point, in the
//     active segment when it is long enough;
//   - zero-page zeroes the part of an aligned 4 KiB page of a segment's log that lies inside
//     the file and past the recovery point, in the active segment when it has such data;
//   - delete-index removes a segment's .index or .timeindex;
//   - bit-rot flips bits as flip-bits does, but in bytes below the recovery point.
//
// The same files, kind and rng state give the same damage.
func Damage(dataDir string, topics []string, kind DamageKind, rng *rand.Rand) (string, error) {
	if !slices.Contains(DamageKinds, kind) && kind != DamageBitRot {
		return "", fmt.Errorf("chaos: unknown damage kind %q", kind)
	}
	segs, err := damageSegments(dataDir, topics)
	if err != nil {
		return "", err
	}
	nothing := func(what string) (string, error) {
		return fmt.Sprintf("%s: nothing to damage (no %s under the chaos topics' partitions)", kind, what), nil
	}
	switch kind {
	case DamageTruncateTail:
		s, ok := pick(rng, segs, func(s damageSegment) bool { return s.last && s.size > 0 }, nil)
		if !ok {
			return nothing("active segment with data")
		}
		cut := 1 + rng.Int64N(min(damagePage, s.size))
		if err := os.Truncate(s.log(), s.size-cut); err != nil {
			return "", fmt.Errorf("chaos: damage: %w", err)
		}
		return fmt.Sprintf("%s: %s cut %d bytes (%d -> %d)", kind, s.name(".log"), cut, s.size, s.size-cut), nil

	case DamageFlipBits, DamageBitRot:
		// The range bits may fall in: past the header and the recovery point (flip-bits), or
		// past the header and below the recovery point (bit-rot).
		lo := func(s damageSegment) int64 {
			if kind == DamageBitRot {
				return damageSkipHeader
			}
			return max(damageSkipHeader, s.rescan)
		}
		hi := func(s damageSegment) int64 {
			if kind == DamageBitRot {
				return min(s.size, s.rescan)
			}
			return s.size
		}
		long := func(s damageSegment) bool { return hi(s) > lo(s) }
		s, ok := pick(rng, segs, func(s damageSegment) bool { return s.last && long(s) }, long)
		if !ok {
			if kind == DamageBitRot {
				return nothing("segment bytes below a recovery point")
			}
			return nothing("segment bytes past a batch header and the recovery point")
		}
		start := lo(s) + rng.Int64N(hi(s)-lo(s))
		span := min(damageFlipSpan, hi(s)-start)
		n := 1 + rng.IntN(min(damageMaxFlips, int(span)*8))
		flips := map[int64]byte{} // byte offset -> mask of the bits to flip
		var at []string
		for len(at) < n {
			off, bit := start+rng.Int64N(span), byte(rng.IntN(8))
			if flips[off]&(1<<bit) != 0 {
				continue
			}
			flips[off] |= 1 << bit
			at = append(at, fmt.Sprintf("byte %d bit %d", off, bit))
		}
		if err := flipBits(s.log(), flips); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: %s %s", kind, s.name(".log"), strings.Join(at, ", ")), nil

	case DamageZeroPage:
		hasData := func(s damageSegment) bool { return s.size > s.rescan }
		s, ok := pick(rng, segs, func(s damageSegment) bool { return s.last && hasData(s) }, hasData)
		if !ok {
			return nothing("segment with data past the recovery point")
		}
		first, end := s.rescan/damagePage, (s.size+damagePage-1)/damagePage
		page := first + rng.Int64N(end-first)
		from, to := max(page*damagePage, s.rescan), min((page+1)*damagePage, s.size)
		if err := writeAt(s.log(), make([]byte, to-from), from); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: %s bytes [%d, %d) zeroed", kind, s.name(".log"), from, to), nil

	default: // DamageDeleteIndex
		s, ok := pick(rng, segs, func(s damageSegment) bool { return len(s.hasIdx) > 0 }, nil)
		if !ok {
			return nothing("index")
		}
		suffix := s.hasIdx[rng.IntN(len(s.hasIdx))]
		if err := os.Remove(filepath.Join(s.dir, s.base+suffix)); err != nil {
			return "", fmt.Errorf("chaos: damage: %w", err)
		}
		return fmt.Sprintf("%s: %s removed", kind, s.name(suffix)), nil
	}
}

// pick chooses a segment that prefer accepts, or failing that one that fallback accepts (nil:
// none).
func pick(rng *rand.Rand, segs []damageSegment, prefer, fallback func(damageSegment) bool) (damageSegment, bool) {
	for _, ok := range []func(damageSegment) bool{prefer, fallback} {
		if ok == nil {
			continue
		}
		var c []damageSegment
		for _, s := range segs {
			if ok(s) {
				c = append(c, s)
			}
		}
		if len(c) > 0 {
			return c[rng.IntN(len(c))], true
		}
	}
	return damageSegment{}, false
}

// damageSegments lists the segments of the topics' partition directories under dataDir, in
// order (partition directory, then base offset).
func damageSegments(dataDir string, topics []string) ([]damageSegment, error) {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return nil, fmt.Errorf("chaos: damage: %w", err)
	}
	var segs []damageSegment
	for _, e := range entries { // sorted by name
		if !e.IsDir() || !isPartitionDir(e.Name(), topics) {
			continue
		}
		dir := filepath.Join(dataDir, e.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("chaos: damage: %w", err)
		}
		have := map[string]bool{}
		for _, f := range files {
			have[f.Name()] = true
		}
		first := len(segs)
		cpBase, cpPos, cpOK := readRecoveryPoint(filepath.Join(dir, "recovery-point"))
		for _, f := range files {
			base, ok := strings.CutSuffix(f.Name(), ".log")
			if !ok || len(base) != 20 || strings.Trim(base, "0123456789") != "" {
				continue
			}
			fi, err := f.Info()
			if err != nil {
				return nil, fmt.Errorf("chaos: damage: %w", err)
			}
			s := damageSegment{dir: dir, base: base, size: fi.Size()}
			// What recovery reads again: everything without a recovery point; else the
			// checkpointed segment from its position, and the segments after it.
			if b, _ := strconv.ParseInt(base, 10, 64); cpOK {
				switch {
				case b < cpBase:
					s.rescan = s.size
				case b == cpBase:
					s.rescan = min(cpPos, s.size)
				}
			}
			for _, suffix := range []string{".index", ".timeindex"} {
				if have[base+suffix] {
					s.hasIdx = append(s.hasIdx, suffix)
				}
			}
			segs = append(segs, s)
		}
		if len(segs) > first {
			segs[len(segs)-1].last = true
		}
	}
	return segs, nil
}

// readRecoveryPoint reads a partition's recovery-point file (segment/doc.go: "SLRP", the
// version, the recovery offset, the segment base at byte 16, the position at byte 24, a
// CRC-32C of the first 36 bytes at byte 36). ok is false when there is none or it does not
// check out: recovery then reads the whole log.
func readRecoveryPoint(path string) (base, pos int64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) != 40 || string(b[:4]) != "SLRP" {
		return 0, 0, false
	}
	if crc32.Checksum(b[:36], crc32.MakeTable(crc32.Castagnoli)) != binary.BigEndian.Uint32(b[36:]) {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(b[16:24])), int64(binary.BigEndian.Uint32(b[24:28])), true
}

// isPartitionDir reports whether name is <topic>-<partition> for one of topics.
func isPartitionDir(name string, topics []string) bool {
	for _, t := range topics {
		if p, ok := strings.CutPrefix(name, t+"-"); ok {
			if _, err := strconv.ParseUint(p, 10, 31); err == nil {
				return true
			}
		}
	}
	return false
}

// flipBits XORs each byte at an offset of flips with its mask.
func flipBits(path string, flips map[int64]byte) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("chaos: damage: %w", err)
	}
	var errs []error
	var b [1]byte
	for off, mask := range flips {
		if _, err := f.ReadAt(b[:], off); err != nil && !errors.Is(err, io.EOF) {
			errs = append(errs, err)
			continue
		}
		b[0] ^= mask
		if _, err := f.WriteAt(b[:], off); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, f.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("chaos: damage %s: %w", path, err)
	}
	return nil
}

func writeAt(path string, p []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("chaos: damage: %w", err)
	}
	_, err = f.WriteAt(p, off)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("chaos: damage %s: %w", path, err)
	}
	return nil
}
