package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"

	"github.com/sluicemq/sluice/batch"
)

// The recovery-point file is read at every open (readCheckpoint): whatever it holds,
// decodeCheckpoint must not panic, must report damage as errBadCheckpoint, and what it accepts
// must satisfy the checkpoint's invariant (offset >= segment >= 0) and be what encode writes.

// FuzzDecodeCheckpoint feeds raw file contents. With fixCRC the fuzzer's bytes get a correct
// CRC-32C, so that it explores what lies behind the checksum (a mutation alone almost never
// produces a matching one).
func FuzzDecodeCheckpoint(f *testing.F) {
	valid := [][]byte{
		checkpoint{offset: 1234, segment: 1000, pos: 56789, maxTs: 1700000000000}.encode(),
		checkpoint{offset: 0, segment: 0, pos: 0, maxTs: -1}.encode(),
		checkpoint{offset: math.MaxInt64, segment: math.MaxInt64, pos: math.MaxUint32, maxTs: math.MaxInt64}.encode(),
	}
	for _, b := range valid {
		f.Add(b, false)
		f.Add(b[:len(b)-1], false)
		f.Add(append(append([]byte(nil), b...), 0), false)
	}
	bad := valid[0]
	f.Add([]byte{}, false)
	f.Add([]byte(checkpointMagic), false)
	f.Add(bytes.Repeat([]byte{0}, checkpointSize), true)
	// offset below segment, negative segment, version 2, non-zero pad: each with a valid CRC
	for _, patch := range []func(b []byte){
		func(b []byte) { binary.BigEndian.PutUint64(b[8:], 999) },
		func(b []byte) { binary.BigEndian.PutUint64(b[16:], uint64(1<<63)) },
		func(b []byte) { b[4] = 2 },
		func(b []byte) { b[5] = 1 },
	} {
		b := append([]byte(nil), bad...)
		patch(b)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, fixCRC bool) {
		data = append([]byte(nil), data...)
		if fixCRC && len(data) == checkpointSize {
			binary.BigEndian.PutUint32(data[36:], crc32.Checksum(data[:36], castagnoli))
		}
		c, err := decodeCheckpoint(data)
		if err != nil {
			if !errors.Is(err, errBadCheckpoint) {
				t.Fatalf("error %v is not errBadCheckpoint", err)
			}
			return
		}
		if c.segment < 0 || c.offset < c.segment {
			t.Fatalf("accepted %+v: want offset >= segment >= 0", c)
		}
		if c.pos < 0 || c.pos > math.MaxUint32 {
			t.Fatalf("accepted position %d", c.pos)
		}
		// The pad (bytes 5-8) is not decoded: the writer zeroes it and the reader ignores it
		// (the CRC covers it, so only a deliberate writer gets anything else past). Every other
		// byte must re-encode the same, and with a zero pad the whole file does.
		enc := c.encode()
		masked := append([]byte(nil), data...)
		clear(masked[5:8])
		binary.BigEndian.PutUint32(masked[36:], crc32.Checksum(masked[:36], castagnoli))
		if !bytes.Equal(enc, masked) {
			t.Fatalf("checkpoint %x decoded to %+v, which encodes to %x", data, c, enc)
		}
		if data[5]|data[6]|data[7] == 0 && !bytes.Equal(enc, data) {
			t.Fatalf("checkpoint %x with a zero pad re-encodes to %x", data, enc)
		}
	})
}

// FuzzCheckpointEncode: every checkpoint the log can write (offset >= segment >= 0, a position
// within a segment, which segment.bytes caps at MaxInt32) decodes back to itself.
func FuzzCheckpointEncode(f *testing.F) {
	f.Add(int64(1234), int64(1000), int64(56789), int64(1700000000000))
	f.Add(int64(0), int64(0), int64(0), int64(-1))
	f.Add(int64(math.MaxInt64), int64(0), int64(math.MaxInt32), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, offset, segment, pos, maxTs int64) {
		c := checkpoint{offset: batch.Offset(offset), segment: batch.Offset(segment), pos: pos, maxTs: maxTs}
		b := c.encode()
		if len(b) != checkpointSize {
			t.Fatalf("encoded %d bytes", len(b))
		}
		got, err := decodeCheckpoint(b)
		valid := segment >= 0 && offset >= segment && pos >= 0 && pos <= math.MaxInt32
		switch {
		case valid && (err != nil || got != c):
			t.Fatalf("%+v: decoded %+v, %v", c, got, err)
		case err == nil && (got.segment < 0 || got.offset < got.segment):
			t.Fatalf("%+v: decoded %+v, which breaks offset >= segment >= 0", c, got)
		case (segment < 0 || offset < segment) && err == nil:
			t.Fatalf("%+v: an invalid checkpoint decoded as %+v", c, got)
		}
	})
}
