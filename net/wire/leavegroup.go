package wire

// LeaveGroup (key 13) takes members out of a group.
//
// Behavior: the group's coordinator answers (others: NOT_COORDINATOR, in ErrorCode). Each
// member leaves at once (a rebalance of the others starts); per member UNKNOWN_MEMBER_ID for
// one the group does not have and FENCED_INSTANCE_ID for a static member whose instance id
// now belongs to another member id. A request for one member also carries its result in
// ErrorCode, as Kafka's first versions read it.

// LeaveGroupRequest names the members that leave.
type LeaveGroupRequest struct {
	GroupID string
	Members []LeaveGroupMember
}

// LeaveGroupMember is one member leaving.
type LeaveGroupMember struct {
	MemberID        string
	GroupInstanceID *string
	Reason          *string
}

const (
	minLeaveGroupMember       = sizeString * 3
	minLeaveGroupMemberResult = sizeString*2 + sizeInt16
)

// Key returns LeaveGroup.
func (*LeaveGroupRequest) Key() APIKey { return LeaveGroup }

// AppendTo appends the body's encoding.
func (l *LeaveGroupRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, l.GroupID)
	return appendArray(dst, l.Members)
}

// ReadFrom decodes b into l (see Message).
func (l *LeaveGroupRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	l.GroupID = r.stringReuse(l.GroupID)
	l.Members = readSlice(&r, l.Members, minLeaveGroupMember)
	for i := range l.Members {
		m := &l.Members[i]
		m.MemberID = r.stringReuse(m.MemberID)
		m.GroupInstanceID = r.nullableString()
		m.Reason = r.nullableString()
	}
	return r.done()
}

func (m *LeaveGroupMember) appendTo(dst []byte) []byte {
	dst = appendString(dst, m.MemberID)
	dst = appendNullableString(dst, m.GroupInstanceID)
	return appendNullableString(dst, m.Reason)
}

// LeaveGroupResponse has one result per member.
type LeaveGroupResponse struct {
	ThrottleMs int32
	ErrorCode  ErrorCode
	Members    []LeaveGroupMemberResult
}

// LeaveGroupMemberResult is one member's leave.
type LeaveGroupMemberResult struct {
	MemberID        string
	GroupInstanceID *string
	ErrorCode       ErrorCode
}

// Key returns LeaveGroup.
func (*LeaveGroupResponse) Key() APIKey { return LeaveGroup }

// AppendTo appends the body's encoding.
func (l *LeaveGroupResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, l.ThrottleMs)
	dst = appendInt16(dst, int16(l.ErrorCode))
	return appendArray(dst, l.Members)
}

// ReadFrom decodes b into l (see Message).
func (l *LeaveGroupResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	l.ThrottleMs = r.int32()
	l.ErrorCode = ErrorCode(r.int16())
	l.Members = readSlice(&r, l.Members, minLeaveGroupMemberResult)
	for i := range l.Members {
		m := &l.Members[i]
		m.MemberID = r.stringReuse(m.MemberID)
		m.GroupInstanceID = r.nullableString()
		m.ErrorCode = ErrorCode(r.int16())
	}
	return r.done()
}

func (m *LeaveGroupMemberResult) appendTo(dst []byte) []byte {
	dst = appendString(dst, m.MemberID)
	dst = appendNullableString(dst, m.GroupInstanceID)
	return appendInt16(dst, int16(m.ErrorCode))
}
