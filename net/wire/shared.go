package wire

// AttachMemory (key 9000) and ProduceShared (key 9001) let a producer on the
// broker's host hand over its record batches in shared memory instead of
// through the socket. They are Sluice's own apis, numbered far above Kafka's.
//
// Behavior: AttachMemory is sent over a unix socket together with a memfd,
// passed as SCM_RIGHTS ancillary data in the same sendmsg as the request's
// first byte. The memfd must be on tmpfs (not hugetlbfs) and sealed against
// shrinking (F_SEAL_SHRINK), so that the broker's mapping of it cannot fault,
// and Bytes must be its size. The broker first drops the connection's region,
// if any, then keeps the new one for the life of the connection (one region
// per connection; one region may be attached to several connections).
// Errors: ErrInvalidRequest if no descriptor came with the request, it is not
// a sealed memfd of Bytes bytes, or the broker allows no regions (or none that
// large) on this connection.
//
// A ProduceShared request is the body of a Produce request (version 0) as a
// list of parts, each some bytes inline followed by a span of the attached
// region: the producer's record batches stay where it built them, in the
// region, and only the small parts between them travel inline. The broker
// copies the spans out of the region before it decodes or checks anything, so a
// client that changes the region afterwards changes nothing the broker does,
// and answers exactly as for that Produce request, in the Produce response
// layout. Once the response arrives the spans are the client's again; acks=0
// gets no response, so a client must not send such a request this way. A span
// may name a guard word (SharedPart): the client changes it before it reuses
// the span's memory, and a request whose guards changed before or while it was
// copied is not served, so the client may reuse the memory of a request that
// got no response (a timeout, a broken connection) without the broker ever
// serving that request with other bytes. A span outside the region, a guard
// outside it or not 8-aligned, a guard that does not hold its value, a body
// longer than the broker's request size limit, or ProduceShared on a
// connection with no region closes the connection as a malformed request does:
// there is no request to answer (a client that gave up on it is gone).

// Sluice's own api keys.
const (
	AttachMemory  APIKey = 9000
	ProduceShared APIKey = 9001
)

// AttachMemoryRequest attaches the memfd sent with it as the connection's
// shared region.
type AttachMemoryRequest struct {
	Bytes int64 // the memfd's size
}

// Key returns AttachMemory.
func (*AttachMemoryRequest) Key() APIKey { return AttachMemory }

// AppendTo appends the body's encoding.
func (a *AttachMemoryRequest) AppendTo(dst []byte) []byte { return appendInt64(dst, a.Bytes) }

// ReadFrom decodes b into a (see Message).
func (a *AttachMemoryRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	a.Bytes = r.int64()
	return r.done()
}

// AttachMemoryResponse says whether the region is attached.
type AttachMemoryResponse struct {
	ErrorCode    ErrorCode
	ErrorMessage *string
}

// Key returns AttachMemory.
func (*AttachMemoryResponse) Key() APIKey { return AttachMemory }

// AppendTo appends the body's encoding.
func (a *AttachMemoryResponse) AppendTo(dst []byte) []byte {
	dst = appendInt16(dst, int16(a.ErrorCode))
	return appendErrorMessage(dst, a.ErrorMessage)
}

// ReadFrom decodes b into a (see Message).
func (a *AttachMemoryResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	a.ErrorCode = ErrorCode(r.int16())
	a.ErrorMessage = r.nullableString()
	return r.done()
}

// ProduceSharedRequest is a Produce request body in parts: the body is each
// part's Inline bytes followed by bytes [Offset, Offset+Length) of the
// attached region, part after part.
type ProduceSharedRequest struct {
	// Version is the version to send (0 or 1, as Produce's: v1 answers carry leader hints);
	// not encoded in the body.
	Version int16
	Parts   []SharedPart
}

// SharedPart is one part of a ProduceSharedRequest. Length 0 is no span.
//
// A span may name a guard: the 8-byte word at GuardOffset (8-aligned, in the
// region; -1 for none), which must hold Guard from before the broker copies the
// span until after it has copied every span of the request. The client changes
// the word before it writes anything else into the memory the guard stands for,
// so a request that the broker reads late (the client gave up on it, and may
// have reused the memory for other records) is refused instead of served with
// bytes it never meant.
type SharedPart struct {
	Inline      []byte // aliases the frame when decoded
	Offset      int64
	Length      int32
	GuardOffset int64
	Guard       uint64
}

const minSharedPart = sizeBytes + sizeInt64 + sizeInt32 + sizeInt64 + sizeInt64

// Key returns ProduceShared.
func (*ProduceSharedRequest) Key() APIKey { return ProduceShared }

// APIVersion implements Versioned.
func (p *ProduceSharedRequest) APIVersion() int16 { return p.Version }

// AppendTo appends the body's encoding.
func (p *ProduceSharedRequest) AppendTo(dst []byte) []byte { return appendArray(dst, p.Parts) }

// ReadFrom decodes b into p (see Message). Inline parts alias b.
func (p *ProduceSharedRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	p.Parts = readSlice(&r, p.Parts, minSharedPart)
	for i := range p.Parts {
		p.Parts[i].readFrom(&r)
	}
	return r.done()
}

// BodyLength is the length of the body the parts make up; ok is false if a
// length is negative or the sum overflows an int32.
func (p *ProduceSharedRequest) BodyLength() (n int, ok bool) {
	var sum int64
	for _, part := range p.Parts {
		if part.Length < 0 {
			return 0, false
		}
		sum += int64(len(part.Inline)) + int64(part.Length)
		if sum > 1<<31-1 {
			return 0, false
		}
	}
	return int(sum), true
}

func (s *SharedPart) appendTo(dst []byte) []byte {
	dst = appendBytes(dst, s.Inline)
	dst = appendInt64(dst, s.Offset)
	dst = appendInt32(dst, s.Length)
	dst = appendInt64(dst, s.GuardOffset)
	return appendInt64(dst, int64(s.Guard))
}

func (s *SharedPart) readFrom(r *reader) {
	s.Inline = r.bytes()
	s.Offset = r.int64()
	s.Length = r.int32()
	s.GuardOffset = r.int64()
	s.Guard = uint64(r.int64())
}

// ProduceSharedResponse is a Produce response: the layout and the meaning are
// Produce's.
type ProduceSharedResponse struct {
	ProduceResponse
}

// Key returns ProduceShared.
func (*ProduceSharedResponse) Key() APIKey { return ProduceShared }
