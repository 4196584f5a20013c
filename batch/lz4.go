package batch

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/pierrec/lz4/v4"
)

// The LZ4 frame format is framed here, around pierrec/lz4's block codec,
// rather than with its Writer and Reader: those allocate per frame and read
// through an extra copy, and the frame is simple enough to own. Only the
// subset Kafka uses is written; everything a Java or librdkafka producer may
// send is read.
//
//	magic 04 22 4D 18 | FLG | BD | [content size u64] | [dict id u32] | HC
//	blocks: size u32 LE (high bit: stored uncompressed; 0: end mark),
//	        data, [block checksum u32]
//	[content checksum u32]
//
// The header, block and content checksums (xxHash32) are skipped, not
// verified: the batch CRC already covers every compressed byte, and Kafka
// brokers skip the header checksum too for old clients that got it wrong.

const (
	lz4Magic         = 0x184D2204
	lz4SkippableMask = 0xFFFFFFF0
	lz4SkippableBase = 0x184D2A50
	lz4Uncompressed  = 0x80000000
	lz4WriteBlock    = 64 << 10

	lz4FlagVersion         = 0xC0
	lz4FlagVersion1        = 0x40
	lz4FlagBlockIndep      = 0x20
	lz4FlagBlockChecksum   = 0x10
	lz4FlagContentSize     = 0x08
	lz4FlagContentChecksum = 0x04
	lz4FlagReserved        = 0x02
	lz4FlagDictID          = 0x01
)

// lz4FrameHeader is the descriptor Kafka's Java producer writes: version 1,
// independent blocks, no checksums, no content size (FLG 0x60), 64 KiB
// blocks (BD 0x40), and the header checksum byte for exactly those two
// bytes, (xxh32(60 40) >> 8) & 0xFF = 0x82.
var lz4FrameHeader = []byte{0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82}

// appendLZ4 appends src as one LZ4 frame of independent 64 KiB blocks.
func (e *encoder) appendLZ4(dst, src []byte) ([]byte, error) {
	dst = append(dst, lz4FrameHeader...)
	for len(src) > 0 {
		chunk := src[:min(len(src), lz4WriteBlock)]
		src = src[len(chunk):]
		start := len(dst)
		dst = grow(dst, 4+lz4.CompressBlockBound(len(chunk)))
		var n int
		var err error
		if e.lzhc != nil {
			n, err = e.lzhc.CompressBlock(chunk, dst[start+4:])
		} else {
			n, err = e.lz.CompressBlock(chunk, dst[start+4:])
		}
		if err != nil {
			return dst[:start], err
		}
		if n == 0 || n >= len(chunk) {
			// Incompressible: a stored block is smaller and cheaper to read.
			copy(dst[start+4:], chunk)
			binary.LittleEndian.PutUint32(dst[start:], uint32(len(chunk))|lz4Uncompressed)
			dst = dst[:start+4+len(chunk)]
			continue
		}
		binary.LittleEndian.PutUint32(dst[start:], uint32(n))
		dst = dst[:start+4+n]
	}
	return append(dst, 0, 0, 0, 0), nil // end mark
}

var errLZ4Truncated = errors.New("lz4: truncated frame")

// unlz4 decodes a sequence of LZ4 frames (skippable frames allowed) into the
// reusable buffer, growing it block by block and never past limit.
func (d *Decompressor) unlz4(src []byte, limit int) ([]byte, error) {
	dst := d.buf[:0]
	for len(src) > 0 {
		if len(src) < 4 {
			return dst, errLZ4Truncated
		}
		magic := binary.LittleEndian.Uint32(src)
		if magic&lz4SkippableMask == lz4SkippableBase {
			if len(src) < 8 {
				return dst, errLZ4Truncated
			}
			n := binary.LittleEndian.Uint32(src[4:])
			if uint64(n) > uint64(len(src)-8) {
				return dst, errLZ4Truncated
			}
			src = src[8+n:]
			continue
		}
		if magic != lz4Magic {
			return dst, fmt.Errorf("lz4: bad magic %#08x", magic)
		}
		var err error
		if dst, src, err = d.lz4Frame(dst, src[4:], limit); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// lz4Frame decodes one frame whose magic has been consumed, appending to
// dst, and returns the input after the frame.
func (d *Decompressor) lz4Frame(dst, src []byte, limit int) ([]byte, []byte, error) {
	if len(src) < 3 {
		return dst, src, errLZ4Truncated
	}
	flg, bd := src[0], src[1]
	if flg&lz4FlagVersion != lz4FlagVersion1 || flg&lz4FlagReserved != 0 || bd&0x8F != 0 {
		return dst, src, fmt.Errorf("lz4: unsupported descriptor FLG %#02x BD %#02x", flg, bd)
	}
	if flg&lz4FlagDictID != 0 {
		return dst, src, errors.New("lz4: frames with a dictionary are not supported")
	}
	sizeIdx := bd >> 4 & 0x7
	if sizeIdx < 4 {
		return dst, src, fmt.Errorf("lz4: bad block size index %d", sizeIdx)
	}
	blockMax := 1 << (8 + 2*int(sizeIdx)) // 4: 64 KiB ... 7: 4 MiB
	hdr := 3                              // FLG, BD, HC
	if flg&lz4FlagContentSize != 0 {
		hdr += 8
	}
	if len(src) < hdr {
		return dst, src, errLZ4Truncated
	}
	src = src[hdr:]
	indep := flg&lz4FlagBlockIndep != 0
	frameStart := len(dst)
	for {
		if len(src) < 4 {
			return dst, src, errLZ4Truncated
		}
		word := binary.LittleEndian.Uint32(src)
		src = src[4:]
		if word == 0 {
			break
		}
		size := int(word &^ lz4Uncompressed)
		if size > blockMax || size > len(src) {
			return dst, src, fmt.Errorf("lz4: block of %d bytes, max %d, %d left", size, blockMax, len(src))
		}
		block := src[:size]
		src = src[size:]
		if flg&lz4FlagBlockChecksum != 0 {
			if len(src) < 4 {
				return dst, src, errLZ4Truncated
			}
			src = src[4:]
		}
		start := len(dst)
		room := min(blockMax, limit-start)
		if word&lz4Uncompressed != 0 {
			if size > room {
				return dst, src, fmt.Errorf("%w: lz4 output passes cap %d", ErrTooLarge, limit)
			}
			dst = growCapped(dst, size, limit)
			copy(dst[start:], block)
			continue
		}
		dst = growCapped(dst, room, limit)
		var dict []byte
		if !indep {
			// Linked blocks may copy from the previous 64 KiB of the frame.
			dict = dst[max(frameStart, start-lz4WriteBlock):start]
		}
		n, err := lz4.UncompressBlockWithDict(block, dst[start:], dict)
		if err != nil && room < blockMax {
			// Too big for the room the cap leaves, or corrupt? A full-size
			// scratch block (at most 4 MiB) tells.
			if cap(d.scratch) < blockMax {
				d.scratch = make([]byte, blockMax)
			}
			if n, err = lz4.UncompressBlockWithDict(block, d.scratch[:blockMax], dict); err == nil {
				if n > room {
					return dst[:start], src, fmt.Errorf("%w: lz4 output passes cap %d", ErrTooLarge, limit)
				}
				copy(dst[start:], d.scratch[:n])
			}
		}
		if err != nil {
			return dst[:start], src, fmt.Errorf("lz4: block: %w", err)
		}
		dst = dst[:start+n]
	}
	if flg&lz4FlagContentChecksum != 0 {
		if len(src) < 4 {
			return dst, src, errLZ4Truncated
		}
		src = src[4:]
	}
	return dst, src, nil
}

// growCapped extends dst by n bytes (n <= limit-len(dst)), reallocating
// geometrically but never to more than limit.
func growCapped(dst []byte, n, limit int) []byte {
	if cap(dst)-len(dst) < n {
		nb := make([]byte, len(dst), min(limit, max(2*cap(dst), len(dst)+n, 4<<10)))
		copy(nb, dst)
		dst = nb
	}
	return dst[:len(dst)+n]
}
