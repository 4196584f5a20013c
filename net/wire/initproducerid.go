package wire

// InitProducerId (key 22) gives a producer its producer id and epoch.
//
// Behavior: an idempotent producer (TransactionalID nil; transactions are not built yet)
// with ProducerID -1 gets a new id, unique in the cluster, from the broker's block of ids
// (the controller hands each broker blocks: AllocateProducerIDs, so no request waits on a
// raft round trip unless its broker's block is used up), and epoch 0. A TransactionalID
// is answered with an error until transactions exist. Errors: COORDINATOR_NOT_AVAILABLE
// while the broker cannot get a block (no controller), retriable.

// InitProducerIDRequest asks for a producer id.
type InitProducerIDRequest struct {
	TransactionalID      *string // nil: an idempotent producer without transactions
	TransactionTimeoutMs int32
	// ProducerID and ProducerEpoch are the producer's current ones (KIP-360), or -1: an
	// idempotent producer bumps its epoch itself, so these are for transactions later.
	ProducerID    int64
	ProducerEpoch int16
}

// InitProducerIDResponse is the id and epoch given.
type InitProducerIDResponse struct {
	ThrottleMs    int32
	ErrorCode     ErrorCode
	ProducerID    int64
	ProducerEpoch int16
}

// Key returns InitProducerID.
func (*InitProducerIDRequest) Key() APIKey { return InitProducerID }

// AppendTo appends the body's encoding.
func (m *InitProducerIDRequest) AppendTo(dst []byte) []byte {
	dst = appendNullableString(dst, m.TransactionalID)
	dst = appendInt32(dst, m.TransactionTimeoutMs)
	dst = appendInt64(dst, m.ProducerID)
	return appendInt16(dst, m.ProducerEpoch)
}

// ReadFrom decodes b into m (see Message).
func (m *InitProducerIDRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	m.TransactionalID = r.nullableString()
	m.TransactionTimeoutMs = r.int32()
	m.ProducerID = r.int64()
	m.ProducerEpoch = r.int16()
	return r.done()
}

// Key returns InitProducerID.
func (*InitProducerIDResponse) Key() APIKey { return InitProducerID }

// AppendTo appends the body's encoding.
func (m *InitProducerIDResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, m.ThrottleMs)
	dst = appendInt16(dst, int16(m.ErrorCode))
	dst = appendInt64(dst, m.ProducerID)
	return appendInt16(dst, m.ProducerEpoch)
}

// ReadFrom decodes b into m (see Message).
func (m *InitProducerIDResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	m.ThrottleMs = r.int32()
	m.ErrorCode = ErrorCode(r.int16())
	m.ProducerID = r.int64()
	m.ProducerEpoch = r.int16()
	return r.done()
}
