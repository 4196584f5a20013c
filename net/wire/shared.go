package wire

// AttachMemory (key 9000) and ProduceShared (key 9001) let a producer on the
// broker's host hand over its requests' bytes through shared memory instead of
// the socket. They are Sluice's own apis, numbered far above Kafka's.
//
// Behavior: AttachMemory is sent over a unix socket together with a memfd,
// passed as SCM_RIGHTS ancillary data in the same sendmsg as the request's
// first byte. The memfd must be on tmpfs (not hugetlbfs) and sealed against
// shrinking (F_SEAL_SHRINK), so that the broker's mapping of it cannot fault,
// and Bytes must be its size. The broker first drops the connection's region, if any, then keeps
// the new one for the life of the connection (one region per connection).
// Errors: ErrInvalidRequest if no descriptor came with the request, it is not
// a sealed memfd of Bytes bytes, or the broker allows no regions (or none that
// large) on this connection.
//
// A ProduceShared request names a span of the attached region that holds the
// body of a Produce request (version 0, records inline). The broker copies the
// span out of the region before it decodes or checks anything, so a
// client that changes the region afterwards changes nothing the broker does,
// and answers exactly as for that Produce request, in the Produce response
// layout. Once the response arrives the span is the client's again; acks=0
// gets no response, so a client must not send such a request this way. A
// span outside the region or longer than the broker's request size limit, or
// ProduceShared on a connection with no region, closes the connection as a
// malformed request does: there is no request to answer.

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
	return appendNullableString(dst, a.ErrorMessage)
}

// ReadFrom decodes b into a (see Message).
func (a *AttachMemoryResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	a.ErrorCode = ErrorCode(r.int16())
	a.ErrorMessage = r.nullableString()
	return r.done()
}

// ProduceSharedRequest points at a Produce request body in the attached
// region: bytes [Offset, Offset+Length).
type ProduceSharedRequest struct {
	Offset int64
	Length int32
}

// Key returns ProduceShared.
func (*ProduceSharedRequest) Key() APIKey { return ProduceShared }

// AppendTo appends the body's encoding.
func (p *ProduceSharedRequest) AppendTo(dst []byte) []byte {
	dst = appendInt64(dst, p.Offset)
	return appendInt32(dst, p.Length)
}

// ReadFrom decodes b into p (see Message).
func (p *ProduceSharedRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	p.Offset = r.int64()
	p.Length = r.int32()
	return r.done()
}

// ProduceSharedResponse is a Produce response: the layout and the meaning are
// Produce's.
type ProduceSharedResponse struct {
	ProduceResponse
}

// Key returns ProduceShared.
func (*ProduceSharedResponse) Key() APIKey { return ProduceShared }
