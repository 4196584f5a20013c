package wire

// FindCoordinator (key 10) names the broker that coordinates a group.
//
// Behavior: any broker answers. The coordinator of a group is the leader of its partition of
// __consumer_offsets, abs(javaHashCode(group id)) % the topic's partition count (Kafka's
// rule). While that topic does not exist yet the first FindCoordinator (or any group request)
// creates it and is answered COORDINATOR_NOT_AVAILABLE, retriable, as while the partition has
// no leader. KeyType 0 is a group; 1 (a transactional id) is INVALID_REQUEST: transactions are
// not built. An empty key is INVALID_GROUP_ID.

// FindCoordinatorRequest asks for the coordinator of CoordinatorKey (Kafka's Key; the
// name is taken by the Key method).
type FindCoordinatorRequest struct {
	CoordinatorKey string
	KeyType        int8 // 0: a consumer group
}

// Key returns FindCoordinator.
func (*FindCoordinatorRequest) Key() APIKey { return FindCoordinator }

// AppendTo appends the body's encoding.
func (f *FindCoordinatorRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, f.CoordinatorKey)
	return appendInt8(dst, f.KeyType)
}

// ReadFrom decodes b into f (see Message).
func (f *FindCoordinatorRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	f.CoordinatorKey = r.stringReuse(f.CoordinatorKey)
	f.KeyType = r.int8()
	return r.done()
}

// FindCoordinatorResponse names the coordinator, or says why not.
type FindCoordinatorResponse struct {
	ThrottleMs   int32
	ErrorCode    ErrorCode
	ErrorMessage *string
	NodeID       int32 // -1 on an error
	Host         string
	Port         int32
}

// Key returns FindCoordinator.
func (*FindCoordinatorResponse) Key() APIKey { return FindCoordinator }

// AppendTo appends the body's encoding.
func (f *FindCoordinatorResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, f.ThrottleMs)
	dst = appendInt16(dst, int16(f.ErrorCode))
	dst = appendErrorMessage(dst, f.ErrorMessage)
	dst = appendInt32(dst, f.NodeID)
	dst = appendString(dst, f.Host)
	return appendInt32(dst, f.Port)
}

// ReadFrom decodes b into f (see Message).
func (f *FindCoordinatorResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	f.ThrottleMs = r.int32()
	f.ErrorCode = ErrorCode(r.int16())
	f.ErrorMessage = r.nullableString()
	f.NodeID = r.int32()
	f.Host = r.stringReuse(f.Host)
	f.Port = r.int32()
	return r.done()
}
