package producerstate

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/sluicemq/sluice/batch"
)

// The snapshot format, big-endian:
//
//	magic    4 bytes  "SLPS"
//	version  int16    1
//	crc      uint32   CRC32C of everything after it
//	offset   int64    the state is as of this offset
//	count    int32    entries, by producer id, strictly increasing
//	entry    count times:
//	  producerId int64, epoch int16, lastTimestamp int64, runs uint8 (0..Window),
//	  run      runs times: firstSeq int32, lastSeq int32, firstOffset int64, lastOffset int64
const (
	snapshotMagic   = "SLPS"
	snapshotVersion = 1
	snapshotHeader  = 4 + 2 + 4 + 8 + 4
	crcStart        = 4 + 2 + 4
	entryHeaderSize = 8 + 2 + 8 + 1
	runSize         = 4 + 4 + 8 + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendSnapshot appends the encoding of the state as of offset (every batch below it
// applied) to dst: a versioned header, the entries by producer id, and a CRC32C of all of it,
// so that a torn or damaged file is detected.
func (s *State) AppendSnapshot(dst []byte, offset batch.Offset) []byte {
	start := len(dst)
	dst = append(dst, snapshotMagic...)
	dst = binary.BigEndian.AppendUint16(dst, snapshotVersion)
	dst = binary.BigEndian.AppendUint32(dst, 0) // the CRC, filled in below
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.producers)))
	for _, id := range s.ids() {
		p := s.producers[id]
		dst = binary.BigEndian.AppendUint64(dst, uint64(id))
		dst = binary.BigEndian.AppendUint16(dst, uint16(p.epoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.lastTs))
		dst = append(dst, p.n)
		for i := 0; i < int(p.n); i++ {
			m := p.at(i)
			dst = binary.BigEndian.AppendUint32(dst, uint32(m.FirstSeq))
			dst = binary.BigEndian.AppendUint32(dst, uint32(m.LastSeq))
			dst = binary.BigEndian.AppendUint64(dst, uint64(m.FirstOffset))
			dst = binary.BigEndian.AppendUint64(dst, uint64(m.LastOffset))
		}
	}
	binary.BigEndian.PutUint32(dst[start+6:], crc32.Checksum(dst[start+crcStart:], castagnoli))
	return dst
}

// DecodeSnapshot decodes a snapshot: the state and the offset it is as of. Every length is
// bounded before anything is allocated; anything that does not decode, or fails the CRC, is
// ErrCorruptSnapshot (wrapped with what was wrong). Never panics.
func DecodeSnapshot(data []byte) (*State, batch.Offset, error) {
	if len(data) < snapshotHeader {
		return nil, 0, fmt.Errorf("%w: %d bytes, the header needs %d", ErrCorruptSnapshot, len(data), snapshotHeader)
	}
	if string(data[:4]) != snapshotMagic {
		return nil, 0, fmt.Errorf("%w: bad magic %q", ErrCorruptSnapshot, data[:4])
	}
	if v := binary.BigEndian.Uint16(data[4:]); v != snapshotVersion {
		return nil, 0, fmt.Errorf("%w: version %d, this build reads %d", ErrCorruptSnapshot, v, snapshotVersion)
	}
	if got, want := crc32.Checksum(data[crcStart:], castagnoli), binary.BigEndian.Uint32(data[6:]); got != want {
		return nil, 0, fmt.Errorf("%w: CRC %#08x, header has %#08x", ErrCorruptSnapshot, got, want)
	}
	offset := batch.Offset(binary.BigEndian.Uint64(data[crcStart:]))
	if offset < 0 {
		return nil, 0, fmt.Errorf("%w: negative offset %d", ErrCorruptSnapshot, offset)
	}
	count := int64(int32(binary.BigEndian.Uint32(data[crcStart+8:])))
	rest := data[snapshotHeader:]
	if count < 0 || count > int64(len(rest)/entryHeaderSize) {
		return nil, 0, fmt.Errorf("%w: %d entries cannot fit in %d bytes", ErrCorruptSnapshot, count, len(rest))
	}
	s := &State{producers: make(map[int64]*producer, count)}
	prevID := int64(-1)
	for i := int64(0); i < count; i++ {
		if len(rest) < entryHeaderSize {
			return nil, 0, fmt.Errorf("%w: entry %d is cut short", ErrCorruptSnapshot, i)
		}
		id := int64(binary.BigEndian.Uint64(rest))
		p := &producer{
			epoch:  int16(binary.BigEndian.Uint16(rest[8:])),
			lastTs: int64(binary.BigEndian.Uint64(rest[10:])),
		}
		n := int(rest[18])
		rest = rest[entryHeaderSize:]
		switch {
		case id <= prevID:
			return nil, 0, fmt.Errorf("%w: producer id %d after %d", ErrCorruptSnapshot, id, prevID)
		case p.epoch < 0:
			return nil, 0, fmt.Errorf("%w: producer %d has epoch %d", ErrCorruptSnapshot, id, p.epoch)
		case n > Window:
			return nil, 0, fmt.Errorf("%w: producer %d has %d runs, the window is %d", ErrCorruptSnapshot, id, n, Window)
		case len(rest) < n*runSize:
			return nil, 0, fmt.Errorf("%w: producer %d's runs are cut short", ErrCorruptSnapshot, id)
		}
		for j := 0; j < n; j++ {
			m := Run{
				FirstSeq:    int32(binary.BigEndian.Uint32(rest)),
				LastSeq:     int32(binary.BigEndian.Uint32(rest[4:])),
				FirstOffset: batch.Offset(binary.BigEndian.Uint64(rest[8:])),
				LastOffset:  batch.Offset(binary.BigEndian.Uint64(rest[16:])),
			}
			if m.FirstSeq < 0 || m.LastSeq < 0 || m.FirstOffset < 0 || m.LastOffset < m.FirstOffset || m.LastOffset >= offset {
				return nil, 0, fmt.Errorf("%w: producer %d has a batch %+v out of range (as of offset %d)", ErrCorruptSnapshot, id, m, offset)
			}
			p.push(m)
			rest = rest[runSize:]
		}
		s.producers[id] = p
		prevID = id
	}
	if len(rest) != 0 {
		return nil, 0, fmt.Errorf("%w: %d bytes after the last entry", ErrCorruptSnapshot, len(rest))
	}
	return s, offset, nil
}
