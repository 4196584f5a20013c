package wire

// SyncGroup (key 14) hands out a generation's assignment.
//
// Behavior: the group's coordinator answers (others: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS). After a join, every member syncs; the leader's request carries
// every member's assignment, the others' carry none (any they carry are ignored). The
// followers' syncs are parked until the leader's arrives; then the group is Stable, its
// snapshot is written to __consumer_offsets (acks=all), and every sync is answered with its
// member's assignment. A sync in a Stable group is answered at once with the member's current
// assignment. Errors: REBALANCE_IN_PROGRESS (a rebalance began: rejoin), ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL (ProtocolType or
// ProtocolName, when set, not the group's). A leader's "consumer" assignment that does not
// decode is INVALID_REQUEST, one naming a partition that does not exist
// UNKNOWN_TOPIC_OR_PARTITION; either leaves the group as it was, and the leader may sync again.

// SyncGroupRequest is one member's sync.
type SyncGroupRequest struct {
	GroupID         string
	GenerationID    int32
	MemberID        string
	GroupInstanceID *string
	ProtocolType    *string // checked against the group's when set
	ProtocolName    *string // checked against the generation's when set
	Assignments     []SyncGroupAssignment
}

// SyncGroupAssignment is one member's assignment, from the leader.
type SyncGroupAssignment struct {
	MemberID   string
	Assignment []byte // for "consumer": a ConsumerAssignment
}

const minSyncGroupAssignment = sizeString + sizeBytes

// Key returns SyncGroup.
func (*SyncGroupRequest) Key() APIKey { return SyncGroup }

// AppendTo appends the body's encoding.
func (s *SyncGroupRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, s.GroupID)
	dst = appendInt32(dst, s.GenerationID)
	dst = appendString(dst, s.MemberID)
	dst = appendNullableString(dst, s.GroupInstanceID)
	dst = appendNullableString(dst, s.ProtocolType)
	dst = appendNullableString(dst, s.ProtocolName)
	return appendArray(dst, s.Assignments)
}

// ReadFrom decodes b into s (see Message). Assignments alias b.
func (s *SyncGroupRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	s.GroupID = r.stringReuse(s.GroupID)
	s.GenerationID = r.int32()
	s.MemberID = r.stringReuse(s.MemberID)
	s.GroupInstanceID = r.nullableString()
	s.ProtocolType = r.nullableString()
	s.ProtocolName = r.nullableString()
	s.Assignments = readSlice(&r, s.Assignments, minSyncGroupAssignment)
	for i := range s.Assignments {
		a := &s.Assignments[i]
		a.MemberID = r.stringReuse(a.MemberID)
		a.Assignment = r.bytes()
	}
	return r.done()
}

func (a *SyncGroupAssignment) appendTo(dst []byte) []byte {
	dst = appendString(dst, a.MemberID)
	return appendBytes(dst, a.Assignment)
}

// SyncGroupResponse is the member's assignment.
type SyncGroupResponse struct {
	ThrottleMs   int32
	ErrorCode    ErrorCode
	ProtocolType *string
	ProtocolName *string
	Assignment   []byte
}

// Key returns SyncGroup.
func (*SyncGroupResponse) Key() APIKey { return SyncGroup }

// AppendTo appends the body's encoding.
func (s *SyncGroupResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, s.ThrottleMs)
	dst = appendInt16(dst, int16(s.ErrorCode))
	dst = appendNullableString(dst, s.ProtocolType)
	dst = appendNullableString(dst, s.ProtocolName)
	return appendBytes(dst, s.Assignment)
}

// ReadFrom decodes b into s (see Message). Assignment aliases b.
func (s *SyncGroupResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	s.ThrottleMs = r.int32()
	s.ErrorCode = ErrorCode(r.int16())
	s.ProtocolType = r.nullableString()
	s.ProtocolName = r.nullableString()
	s.Assignment = r.bytes()
	return r.done()
}
