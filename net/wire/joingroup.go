package wire

// JoinGroup (key 11) asks to join a group, or to rejoin it for a rebalance.
//
// Behavior: the group's coordinator answers (others: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS while it loads, COORDINATOR_NOT_AVAILABLE). A new dynamic member
// (empty MemberID, no GroupInstanceID) is answered MEMBER_ID_REQUIRED with the id to join with
// (KIP-394); the join with it is parked until every member has rejoined (or the rebalance
// timeout passes, or, for a group that was empty, group.initial.rebalance.delay.ms), and then
// every parked join is answered with the new generation: the leader's answer lists the members
// and their metadata for the chosen protocol, which the leader assigns from. A static member
// (GroupInstanceID set) that rejoins while the group is Stable with the same protocols gets a
// new member id and the current generation with no rebalance; a static leader so rejoining is
// told SkipAssignment (KIP-814). Errors: INCONSISTENT_GROUP_PROTOCOL (another protocol type, or
// no protocol every member supports), UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT (outside
// group.min/max.session.timeout.ms), FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
// INVALID_GROUP_ID, REBALANCE_IN_PROGRESS (a newer join of the same member replaced this one).

// JoinGroupRequest is a member's (re)join.
type JoinGroupRequest struct {
	GroupID            string
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	MemberID           string  // "" for a new member
	GroupInstanceID    *string // static membership; nil for a dynamic member
	ProtocolType       string  // "consumer" for consumers
	Protocols          []JoinGroupProtocol
	Reason             *string // why the member (re)joins, for the coordinator's log
}

// JoinGroupProtocol is one protocol (assignor) the member supports, most preferred first.
type JoinGroupProtocol struct {
	Name     string
	Metadata []byte // for "consumer": a ConsumerSubscription
}

const (
	minJoinGroupProtocol = sizeString + sizeBytes
	minJoinGroupMember   = sizeString*2 + sizeBytes
)

// Key returns JoinGroup.
func (*JoinGroupRequest) Key() APIKey { return JoinGroup }

// AppendTo appends the body's encoding.
func (j *JoinGroupRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, j.GroupID)
	dst = appendInt32(dst, j.SessionTimeoutMs)
	dst = appendInt32(dst, j.RebalanceTimeoutMs)
	dst = appendString(dst, j.MemberID)
	dst = appendNullableString(dst, j.GroupInstanceID)
	dst = appendString(dst, j.ProtocolType)
	dst = appendArray(dst, j.Protocols)
	return appendNullableString(dst, j.Reason)
}

// ReadFrom decodes b into j (see Message). Metadata aliases b.
func (j *JoinGroupRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	j.GroupID = r.stringReuse(j.GroupID)
	j.SessionTimeoutMs = r.int32()
	j.RebalanceTimeoutMs = r.int32()
	j.MemberID = r.stringReuse(j.MemberID)
	j.GroupInstanceID = r.nullableString()
	j.ProtocolType = r.stringReuse(j.ProtocolType)
	j.Protocols = readSlice(&r, j.Protocols, minJoinGroupProtocol)
	for i := range j.Protocols {
		j.Protocols[i].readFrom(&r)
	}
	j.Reason = r.nullableString()
	return r.done()
}

func (p *JoinGroupProtocol) appendTo(dst []byte) []byte {
	dst = appendString(dst, p.Name)
	return appendBytes(dst, p.Metadata)
}

func (p *JoinGroupProtocol) readFrom(r *reader) {
	p.Name = r.stringReuse(p.Name)
	p.Metadata = r.bytes()
}

// JoinGroupResponse is the outcome of a join: the generation it is part of.
type JoinGroupResponse struct {
	ThrottleMs     int32
	ErrorCode      ErrorCode
	GenerationID   int32 // -1 on an error
	ProtocolType   *string
	ProtocolName   *string // the protocol chosen for the generation
	Leader         string
	SkipAssignment bool // the leader is a static member rejoining: do not assign (KIP-814)
	MemberID       string
	Members        []JoinGroupMember // the leader's answer only
}

// JoinGroupMember is one member as the leader sees it.
type JoinGroupMember struct {
	MemberID        string
	GroupInstanceID *string
	Metadata        []byte // its metadata for the chosen protocol
}

// Key returns JoinGroup.
func (*JoinGroupResponse) Key() APIKey { return JoinGroup }

// AppendTo appends the body's encoding.
func (j *JoinGroupResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, j.ThrottleMs)
	dst = appendInt16(dst, int16(j.ErrorCode))
	dst = appendInt32(dst, j.GenerationID)
	dst = appendNullableString(dst, j.ProtocolType)
	dst = appendNullableString(dst, j.ProtocolName)
	dst = appendString(dst, j.Leader)
	dst = appendBool(dst, j.SkipAssignment)
	dst = appendString(dst, j.MemberID)
	return appendArray(dst, j.Members)
}

// ReadFrom decodes b into j (see Message). Metadata aliases b.
func (j *JoinGroupResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	j.ThrottleMs = r.int32()
	j.ErrorCode = ErrorCode(r.int16())
	j.GenerationID = r.int32()
	j.ProtocolType = r.nullableString()
	j.ProtocolName = r.nullableString()
	j.Leader = r.stringReuse(j.Leader)
	j.SkipAssignment = r.bool()
	j.MemberID = r.stringReuse(j.MemberID)
	j.Members = readSlice(&r, j.Members, minJoinGroupMember)
	for i := range j.Members {
		m := &j.Members[i]
		m.MemberID = r.stringReuse(m.MemberID)
		m.GroupInstanceID = r.nullableString()
		m.Metadata = r.bytes()
	}
	return r.done()
}

func (m *JoinGroupMember) appendTo(dst []byte) []byte {
	dst = appendString(dst, m.MemberID)
	dst = appendNullableString(dst, m.GroupInstanceID)
	return appendBytes(dst, m.Metadata)
}
