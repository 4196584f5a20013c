package wire

import (
	"encoding/binary"
	"math"
)

// Frame sizes. They are part of the format.
const (
	// MaxRequestBytes is the default largest request frame a broker accepts
	// (Kafka's socket.request.max.bytes, 100 MiB). The limit applies to the
	// size field, i.e. to the bytes after it.
	MaxRequestBytes = 100 << 20

	// FrameSizeLen is the length of the int32 size field that starts every
	// frame.
	FrameSizeLen = 4

	// MinRequestHeaderLen is the smallest request header after the size
	// field: api key, api version, correlation id and an empty client id.
	MinRequestHeaderLen = sizeInt16 + sizeInt16 + sizeInt32 + sizeString

	// ResponseHeaderLen is the length of the response header after the size
	// field: the correlation id.
	ResponseHeaderLen = sizeInt32
)

// ReadFrameSize decodes the size field of a request frame and checks it
// against [MinRequestHeaderLen, maxSize] so that the caller can allocate the
// frame buffer without trusting the peer. The result is the number of bytes
// that follow the size field.
//
// A connection that fails this check must be closed: there is no way to find
// the next frame.
func ReadFrameSize(hdr [FrameSizeLen]byte, maxSize int) (int, error) {
	return readFrameSize(hdr, MinRequestHeaderLen, maxSize)
}

// ReadResponseFrameSize is ReadFrameSize for response frames, whose header is
// only the correlation id. Clients choose maxSize from what they asked for (a
// Fetch response can hold fetch.max.bytes of records plus its metadata).
func ReadResponseFrameSize(hdr [FrameSizeLen]byte, maxSize int) (int, error) {
	return readFrameSize(hdr, ResponseHeaderLen, maxSize)
}

func readFrameSize(hdr [FrameSizeLen]byte, minSize, maxSize int) (int, error) {
	n := int(int32(binary.BigEndian.Uint32(hdr[:])))
	switch {
	case n < minSize:
		return 0, ErrFrameTooSmall
	case n > maxSize:
		return 0, ErrFrameTooLarge
	}
	return n, nil
}

// RequestHeader starts every request frame, right after the size field.
type RequestHeader struct {
	APIKey        APIKey
	APIVersion    int16
	CorrelationID int32  // echoed in the response; lets a client pipeline requests
	ClientID      string // free-form, for logs and quotas
}

// AppendTo appends the header's encoding.
func (h *RequestHeader) AppendTo(dst []byte) []byte {
	dst = appendInt16(dst, int16(h.APIKey))
	dst = appendInt16(dst, h.APIVersion)
	dst = appendInt32(dst, h.CorrelationID)
	return appendString(dst, h.ClientID)
}

// ReadFrom decodes the header at the start of frame (the bytes after the size
// field) and returns the body that follows it, a sub-slice of frame. The
// header does not say how long the body is: the frame does. The client id
// is reused when it is unchanged, so one header value per connection decodes
// without allocating.
func (h *RequestHeader) ReadFrom(frame []byte) (body []byte, err error) {
	r := reader{b: frame}
	h.APIKey = APIKey(r.int16())
	h.APIVersion = r.int16()
	h.CorrelationID = r.int32()
	h.ClientID = r.stringReuse(h.ClientID)
	if r.err != nil {
		return nil, r.err
	}
	return r.b, nil
}

// ResponseHeader starts every response frame, right after the size field.
type ResponseHeader struct {
	CorrelationID int32
}

// AppendTo appends the header's encoding.
func (h *ResponseHeader) AppendTo(dst []byte) []byte {
	return appendInt32(dst, h.CorrelationID)
}

// ReadFrom decodes the header at the start of frame and returns the body.
func (h *ResponseHeader) ReadFrom(frame []byte) (body []byte, err error) {
	r := reader{b: frame}
	h.CorrelationID = r.int32()
	if r.err != nil {
		return nil, r.err
	}
	return r.b, nil
}

// BeginFrame appends a placeholder for the size field and returns the buffer
// and the offset of the placeholder, to pass to FinishFrame once the header
// and body have been appended. Encoding in place and backfilling the size
// avoids computing the size in a separate pass.
func BeginFrame(dst []byte) (buf []byte, start int) {
	return append(dst, 0, 0, 0, 0), len(dst)
}

// FinishFrame writes the size of the frame started at start: the bytes
// appended after the size field plus extra, the bytes that will be sent
// separately (record bytes sent with sendfile). It fails with
// ErrFrameTooLarge if the size does not fit the int32 field.
func FinishFrame(buf []byte, start int, extra int64) error {
	n := int64(len(buf)-start-FrameSizeLen) + extra
	if extra < 0 || n > math.MaxInt32 {
		return ErrFrameTooLarge
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(n))
	return nil
}

// AppendRequestFrame appends a complete request frame: size, h, body. h is
// written as given; its APIKey must be body's.
//
// It panics if the frame exceeds the int32 size field, which only a caller
// bug can cause (the body would be over 2 GiB).
func AppendRequestFrame(dst []byte, h *RequestHeader, body Encoder) []byte {
	buf, start := BeginFrame(dst)
	buf = h.AppendTo(buf)
	buf = body.AppendTo(buf)
	mustFinish(buf, start)
	return buf
}

// AppendResponseFrame appends a complete response frame: size, correlation
// id, body. For a Fetch response whose records are sent with sendfile, use
// AppendFetchResponseFrame instead.
//
// It panics if the frame exceeds the int32 size field (see
// AppendRequestFrame).
func AppendResponseFrame(dst []byte, correlationID int32, body Encoder) []byte {
	buf, start := BeginFrame(dst)
	buf = appendInt32(buf, correlationID)
	buf = body.AppendTo(buf)
	mustFinish(buf, start)
	return buf
}

func mustFinish(buf []byte, start int) {
	if err := FinishFrame(buf, start, 0); err != nil {
		panic(&EncodeError{"wire: encoded frame exceeds the int32 size field"})
	}
}
