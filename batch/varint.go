package batch

import (
	"encoding/binary"
	"math/bits"
)

// Kafka's varint and varlong are zigzag-encoded unsigned LEB128, exactly
// what encoding/binary's AppendVarint and Varint implement for int64. These
// helpers add the int32 width check and size prediction the record codec
// needs.

const (
	maxVarintLen  = 5  // int32
	maxVarlongLen = 10 // int64
)

// varintLen is the encoded size of v as a varint or varlong.
func varintLen(v int64) int {
	ux := uint64(v<<1) ^ uint64(v>>63) // zigzag
	return (bits.Len64(ux|1) + 6) / 7
}

// bytesFieldLen is the encoded size of a nullable length-prefixed field.
func bytesFieldLen(b []byte) int {
	if b == nil {
		return 1 // varint -1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendVarint(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

// appendBytesField appends a nullable length-prefixed field: nil is -1.
func appendBytesField(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 1) // zigzag(-1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// readVarint decodes a varint (int32) from b. n is the bytes read; n <= 0
// means truncated or longer than 5 bytes or out of int32 range.
func readVarint(b []byte) (v int32, n int) {
	// Fast path: most lengths and deltas are under 64.
	if len(b) > 0 && b[0] < 0x80 {
		ux := uint32(b[0])
		return int32(ux>>1) ^ -int32(ux&1), 1
	}
	var ux uint64
	for i := 0; i < maxVarintLen; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		ux |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if ux > 0xffffffff {
				return 0, -1
			}
			u := uint32(ux)
			return int32(u>>1) ^ -int32(u&1), i + 1
		}
	}
	return 0, -1
}

// readVarlong decodes a varlong (int64) from b with the same n convention.
func readVarlong(b []byte) (int64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		ux := uint64(b[0])
		return int64(ux>>1) ^ -int64(ux&1), 1
	}
	v, n := binary.Varint(b)
	if n == 0 {
		return 0, 0
	}
	if n < 0 {
		return 0, -1
	}
	return v, n
}
