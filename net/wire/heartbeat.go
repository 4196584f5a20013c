package wire

// Heartbeat (key 12) keeps a group member's session alive.
//
// Behavior: the group's coordinator answers (others: NOT_COORDINATOR, and
// COORDINATOR_LOAD_IN_PROGRESS while it loads). A heartbeat resets the member's session
// timeout. NoError while the group is Stable or awaits the leader's SyncGroup;
// REBALANCE_IN_PROGRESS while it rebalances (the member rejoins); UNKNOWN_MEMBER_ID for a
// member the group does not have (expired, or left); ILLEGAL_GENERATION for another generation;
// FENCED_INSTANCE_ID for a static member replaced by a newer instance.

// HeartbeatRequest is one member's heartbeat.
type HeartbeatRequest struct {
	GroupID         string
	GenerationID    int32
	MemberID        string
	GroupInstanceID *string // static membership (KIP-345); nil for a dynamic member
}

// Key returns Heartbeat.
func (*HeartbeatRequest) Key() APIKey { return Heartbeat }

// AppendTo appends the body's encoding.
func (h *HeartbeatRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, h.GroupID)
	dst = appendInt32(dst, h.GenerationID)
	dst = appendString(dst, h.MemberID)
	return appendNullableString(dst, h.GroupInstanceID)
}

// ReadFrom decodes b into h (see Message).
func (h *HeartbeatRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	h.GroupID = r.stringReuse(h.GroupID)
	h.GenerationID = r.int32()
	h.MemberID = r.stringReuse(h.MemberID)
	h.GroupInstanceID = r.nullableString()
	return r.done()
}

// HeartbeatResponse is the heartbeat's outcome.
type HeartbeatResponse struct {
	ThrottleMs int32
	ErrorCode  ErrorCode
}

// Key returns Heartbeat.
func (*HeartbeatResponse) Key() APIKey { return Heartbeat }

// AppendTo appends the body's encoding.
func (h *HeartbeatResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, h.ThrottleMs)
	return appendInt16(dst, int16(h.ErrorCode))
}

// ReadFrom decodes b into h (see Message).
func (h *HeartbeatResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	h.ThrottleMs = r.int32()
	h.ErrorCode = ErrorCode(r.int16())
	return r.done()
}
