package batch

// CRC-32C combination: the checksum of a concatenation A‖B from the checksums of A and B and
// the length of B, so that a batch's records can be checksummed while they are appended (hot in
// the appending core's cache) and joined with the header's checksum, known only at Build.
//
// A CRC is the remainder of the message polynomial times x^32 modulo the generator P, plus
// terms from the pre- and post-conditioning that depend only on the length. Appending len(B)
// bytes to A multiplies A's part by x^(8·len(B)) mod P; the conditioning terms cancel in
// crc(A‖B) = crc(A)·x^(8·len(B)) mod P ⊕ crc(B), the identity zlib's crc32_combine uses. All
// polynomials here are in the reflected bit order of the checksums themselves (the x^0
// coefficient is the top bit), so "times x" is a shift right.

// castagnoliPoly is the reflected Castagnoli polynomial (crc32.Castagnoli).
const castagnoliPoly = 0x82f63b78

// x2nTable[k] is x^(2^k) mod P. xPow8n reads entry 3+b for bit b of a length, so 64 entries
// cover lengths below 2^61 (a batch is at most MaxBatchSize) without relying on the order of x
// modulo P to wrap around.
var x2nTable = func() (t [64]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = mulModP(t[k-1], t[k-1])
	}
	return t
}()

// mulModP returns a·b mod P.
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		// b = b·x mod P
		if b&1 != 0 {
			b = b>>1 ^ castagnoliPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8n returns x^(8n) mod P: the factor that shifts a checksum past n more bytes.
func xPow8n(n int) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n > 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			p = mulModP(x2nTable[k], p)
		}
	}
	return p
}

// crcCombine returns the CRC-32C of A‖B given crcA, crcB and len(B).
func crcCombine(crcA, crcB uint32, lenB int) uint32 {
	return mulModP(xPow8n(lenB), crcA) ^ crcB
}
