package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// This file holds the primitive encoders and the sticky-error reader that
// every message is built from. The rules are in the package doc; the ones
// that matter for safety are:
//
//   - every length or count is checked against the bytes that remain before
//     anything is allocated, so a decoder allocates O(len(input)) at most;
//   - the reader keeps the first error and then reads as empty, so decoders
//     are straight-line code that checks the error once at the end;
//   - byte fields (records) are returned as sub-slices of the input, never
//     copied: that is what makes Produce decode free of record copies.

// Encoded sizes of the fixed-width parts, used for minimum element sizes.
const (
	sizeInt8   = 1
	sizeInt16  = 2
	sizeInt32  = 4
	sizeInt64  = 8
	sizeBool   = 1
	sizeString = 2 // int16 length prefix of an empty or null string
	sizeBytes  = 4 // int32 length prefix of empty or null bytes
	sizeArray  = 4 // int32 count of an empty or null array
)

func appendInt8(dst []byte, v int8) []byte { return append(dst, byte(v)) }

func appendInt16(dst []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(v))
}

func appendInt32(dst []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(v))
}

func appendInt64(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// EncodeError is what the encoders panic with when a field is too long for its length prefix:
// a string over 32767 bytes, bytes or an array over 2^31-1. Nothing is cut silently. The broker
// encodes only what it bounds (names it validated, strings it decoded from int16 prefixes,
// error messages cut by appendErrorMessage); a client encodes what an application gives it,
// and recovers this panic into an error with CatchEncodeError.
type EncodeError struct{ msg string }

func (e *EncodeError) Error() string { return e.msg }

// CatchEncodeError, deferred around an encoding, turns an EncodeError panic into *err and
// lets any other panic through.
func CatchEncodeError(err *error) {
	if v := recover(); v != nil {
		e, ok := v.(*EncodeError)
		if !ok {
			panic(v)
		}
		*err = e
	}
}

// appendString writes a non-nullable string; one longer than the int16 prefix can express
// panics with an EncodeError rather than being cut.
func appendString(dst []byte, s string) []byte {
	if len(s) > math.MaxInt16 {
		panic(&EncodeError{fmt.Sprintf("wire: string of %d bytes exceeds the int16 length prefix", len(s))})
	}
	dst = appendInt16(dst, int16(len(s)))
	return append(dst, s...)
}

// appendNullableString writes nil as length -1.
func appendNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return appendInt16(dst, -1)
	}
	return appendString(dst, *s)
}

// MaxErrorMessageBytes bounds the error messages responses carry. A message is for a human,
// and it may quote what a client sent (an invalid config value can be 32 KiB), so the encoder
// cuts it rather than let the quote overflow the string's int16 length prefix.
const MaxErrorMessageBytes = 4096

// appendErrorMessage writes a nullable error message, cut to MaxErrorMessageBytes at a UTF-8
// boundary and marked as cut.
func appendErrorMessage(dst []byte, s *string) []byte {
	if s == nil || len(*s) <= MaxErrorMessageBytes {
		return appendNullableString(dst, s)
	}
	const mark = " [cut]"
	cut := MaxErrorMessageBytes - len(mark)
	for cut > 0 && !utf8.RuneStart((*s)[cut]) {
		cut--
	}
	short := (*s)[:cut] + mark
	return appendString(dst, short)
}

// appendBytes writes nullable bytes: nil as length -1, empty as length 0.
func appendBytes(dst []byte, b []byte) []byte {
	if b == nil {
		return appendInt32(dst, -1)
	}
	if len(b) > math.MaxInt32 {
		panic(&EncodeError{fmt.Sprintf("wire: %d bytes exceed the int32 length prefix", len(b))})
	}
	dst = appendInt32(dst, int32(len(b)))
	return append(dst, b...)
}

// appendArrayLen writes the count of a non-nullable array (nil writes 0).
func appendArrayLen(dst []byte, n int) []byte {
	if n > math.MaxInt32 {
		panic(&EncodeError{fmt.Sprintf("wire: array of %d elements exceeds the int32 count", n)})
	}
	return appendInt32(dst, int32(n))
}

// appendNullableArrayLen writes -1 for a nil slice, else its length.
func appendNullableArrayLen(dst []byte, isNil bool, n int) []byte {
	if isNil {
		return appendInt32(dst, -1)
	}
	return appendArrayLen(dst, n)
}

func appendInt32s(dst []byte, v []int32) []byte {
	dst = appendArrayLen(dst, len(v))
	for _, x := range v {
		dst = appendInt32(dst, x)
	}
	return dst
}

// appendNullableInt32s writes a nullable array of int32 (nil = null).
func appendNullableInt32s(dst []byte, v []int32) []byte {
	dst = appendNullableArrayLen(dst, v == nil, len(v))
	for _, x := range v {
		dst = appendInt32(dst, x)
	}
	return dst
}

func appendStrings(dst []byte, v []string) []byte {
	dst = appendArrayLen(dst, len(v))
	for _, s := range v {
		dst = appendString(dst, s)
	}
	return dst
}

// appendNullableStrings writes a nullable array of strings (nil = null).
func appendNullableStrings(dst []byte, v []string) []byte {
	dst = appendNullableArrayLen(dst, v == nil, len(v))
	for _, s := range v {
		dst = appendString(dst, s)
	}
	return dst
}

// element is implemented by the pointer to every struct that appears inside
// an array: appendTo encodes it, so arrays of any element type share one
// encoder. Each also has readFrom(*reader), called by its parent's decoder
// (see readSlice for why that loop is not generic).
type element[T any] interface {
	*T
	appendTo(dst []byte) []byte
}

func appendArray[T any, P element[T]](dst []byte, s []T) []byte {
	dst = appendArrayLen(dst, len(s))
	for i := range s {
		dst = P(&s[i]).appendTo(dst)
	}
	return dst
}

func appendNullableArray[T any, P element[T]](dst []byte, s []T) []byte {
	dst = appendNullableArrayLen(dst, s == nil, len(s))
	for i := range s {
		dst = P(&s[i]).appendTo(dst)
	}
	return dst
}

// reader decodes primitives from b. The first failure is kept in err and
// empties b, so every later read returns a zero value without touching
// memory and the caller checks err once, at the end (kbin's pattern).
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

// done reports the first error, or ErrTrailingBytes if input is left over:
// a body longer than its version's layout means the peers disagree on the
// layout, and guessing would corrupt the fields that follow.
func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		return ErrTrailingBytes
	}
	return r.err
}

func (r *reader) int8() int8 {
	if len(r.b) < 1 {
		r.fail(ErrShortBuffer)
		return 0
	}
	v := int8(r.b[0])
	r.b = r.b[1:]
	return v
}

func (r *reader) int16() int16 {
	if len(r.b) < 2 {
		r.fail(ErrShortBuffer)
		return 0
	}
	v := int16(binary.BigEndian.Uint16(r.b))
	r.b = r.b[2:]
	return v
}

func (r *reader) int32() int32 {
	if len(r.b) < 4 {
		r.fail(ErrShortBuffer)
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b))
	r.b = r.b[4:]
	return v
}

func (r *reader) int64() int64 {
	if len(r.b) < 8 {
		r.fail(ErrShortBuffer)
		return 0
	}
	v := int64(binary.BigEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

// bool reads any non-zero byte as true, as Kafka does.
func (r *reader) bool() bool { return r.int8() != 0 }

// span returns the next n bytes as a sub-slice of the input, or fails with
// ErrShortBuffer if fewer remain. The three-index slice caps the result so
// an append by the caller cannot overwrite the bytes that follow.
func (r *reader) span(n int) []byte {
	if n > len(r.b) {
		r.fail(ErrShortBuffer)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// stringReuse reads a non-nullable string. If the bytes equal old it returns
// old, so decoding into a reused value costs no allocation when topic names
// repeat (the compiler does not allocate for the comparison).
func (r *reader) stringReuse(old string) string {
	n := r.int16()
	if n < 0 {
		if r.err == nil {
			r.fail(ErrInvalidLength)
		}
		return ""
	}
	b := r.span(int(n))
	if string(b) == old {
		return old
	}
	return string(b)
}

// nullableString reads a string whose length -1 means null (nil).
func (r *reader) nullableString() *string {
	n := r.int16()
	switch {
	case n == -1:
		return nil
	case n < -1:
		r.fail(ErrInvalidLength)
		return nil
	}
	b := r.span(int(n))
	if r.err != nil {
		return nil
	}
	s := string(b)
	return &s
}

// bytes reads nullable bytes as a sub-slice of the input (no copy): -1 is
// nil, 0 is a non-nil empty slice.
func (r *reader) bytes() []byte {
	n := r.int32()
	switch {
	case n == -1:
		return nil
	case n < -1:
		r.fail(ErrInvalidLength)
		return nil
	}
	return r.span(int(n))
}

// count reads an array count and bounds it by the bytes that remain: each
// element takes at least minElem bytes, so a larger count cannot be honest
// and is rejected before the caller allocates. It returns -1 only for a
// null array when nullable is set.
func (r *reader) count(minElem int, nullable bool) int {
	n := r.int32()
	if r.err != nil {
		return 0
	}
	if n < 0 {
		if n == -1 && nullable {
			return -1
		}
		r.fail(ErrInvalidLength)
		return 0
	}
	if int(n) > len(r.b)/minElem {
		r.fail(ErrShortBuffer)
		return 0
	}
	return int(n)
}

// resize returns s with length n, reusing its backing array when it is big
// enough. Callers overwrite every field of every element.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// resizeNullable is resize for a nullable array: n == -1 gives nil and n == 0
// a non-nil empty slice, so null and empty survive a round trip.
func resizeNullable[T any](s []T, n int) []T {
	switch {
	case n < 0:
		return nil
	case s == nil:
		return make([]T, n) // zero length does not allocate
	}
	return resize(s, n)
}

// readSlice reads the count of a non-nullable array and resizes s to it; the
// caller then decodes each element with its readFrom. (A generic helper that
// also called readFrom would make the reader escape to the heap: the
// compiler cannot see through the dictionary call, and that would cost an
// allocation per decode.)
func readSlice[T any](r *reader, s []T, minElem int) []T {
	return resize(s, r.count(minElem, false))
}

// readNullableSlice is readSlice for a nullable array (see resizeNullable).
func readNullableSlice[T any](r *reader, s []T, minElem int) []T {
	return resizeNullable(s, r.count(minElem, true))
}

func (r *reader) int32s(s []int32) []int32 {
	s = resize(s, r.count(sizeInt32, false))
	for i := range s {
		s[i] = r.int32()
	}
	return s
}

// nullableInt32s reads a nullable array of int32: null gives nil, empty a non-nil empty slice.
func (r *reader) nullableInt32s(s []int32) []int32 {
	s = resizeNullable(s, r.count(sizeInt32, true))
	for i := range s {
		s[i] = r.int32()
	}
	return s
}

func (r *reader) strings(s []string) []string {
	s = resize(s, r.count(sizeString, false))
	for i := range s {
		s[i] = r.stringReuse(s[i])
	}
	return s
}

func (r *reader) nullableStrings(s []string) []string {
	s = resizeNullable(s, r.count(sizeString, true))
	for i := range s {
		s[i] = r.stringReuse(s[i])
	}
	return s
}
