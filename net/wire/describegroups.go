package wire

// DescribeGroups (key 15) describes groups: state, protocol and members.
//
// Behavior: each group is answered by its coordinator (others: NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS in its ErrorCode, so a client asks each group's coordinator). A
// group the coordinator does not know is answered as Kafka does: NoError, state "Dead", no
// members. GroupState is one of Empty, PreparingRebalance, CompletingRebalance, Stable, Dead;
// ProtocolData is the generation's protocol (the assignor's name for consumers).

// DescribeGroupsRequest names the groups.
type DescribeGroupsRequest struct {
	Groups []string
}

// Key returns DescribeGroups.
func (*DescribeGroupsRequest) Key() APIKey { return DescribeGroups }

// AppendTo appends the body's encoding.
func (d *DescribeGroupsRequest) AppendTo(dst []byte) []byte { return appendStrings(dst, d.Groups) }

// ReadFrom decodes b into d (see Message).
func (d *DescribeGroupsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	d.Groups = r.strings(d.Groups)
	return r.done()
}

// DescribeGroupsResponse has one entry per group asked for.
type DescribeGroupsResponse struct {
	ThrottleMs int32
	Groups     []DescribedGroup
}

// DescribedGroup is one group.
type DescribedGroup struct {
	ErrorCode    ErrorCode
	GroupID      string
	GroupState   string
	ProtocolType string
	ProtocolData string
	Members      []DescribedGroupMember
}

// DescribedGroupMember is one member.
type DescribedGroupMember struct {
	MemberID         string
	GroupInstanceID  *string
	ClientID         string
	ClientHost       string
	MemberMetadata   []byte // its metadata for the generation's protocol
	MemberAssignment []byte
}

const (
	minDescribedGroup       = sizeInt16 + sizeString*4 + sizeArray
	minDescribedGroupMember = sizeString*4 + sizeBytes*2
)

// Key returns DescribeGroups.
func (*DescribeGroupsResponse) Key() APIKey { return DescribeGroups }

// AppendTo appends the body's encoding.
func (d *DescribeGroupsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, d.ThrottleMs)
	return appendArray(dst, d.Groups)
}

// ReadFrom decodes b into d (see Message). Metadata and assignments alias b.
func (d *DescribeGroupsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	d.ThrottleMs = r.int32()
	d.Groups = readSlice(&r, d.Groups, minDescribedGroup)
	for i := range d.Groups {
		g := &d.Groups[i]
		g.ErrorCode = ErrorCode(r.int16())
		g.GroupID = r.stringReuse(g.GroupID)
		g.GroupState = r.stringReuse(g.GroupState)
		g.ProtocolType = r.stringReuse(g.ProtocolType)
		g.ProtocolData = r.stringReuse(g.ProtocolData)
		g.Members = readSlice(&r, g.Members, minDescribedGroupMember)
		for j := range g.Members {
			m := &g.Members[j]
			m.MemberID = r.stringReuse(m.MemberID)
			m.GroupInstanceID = r.nullableString()
			m.ClientID = r.stringReuse(m.ClientID)
			m.ClientHost = r.stringReuse(m.ClientHost)
			m.MemberMetadata = r.bytes()
			m.MemberAssignment = r.bytes()
		}
	}
	return r.done()
}

func (g *DescribedGroup) appendTo(dst []byte) []byte {
	dst = appendInt16(dst, int16(g.ErrorCode))
	dst = appendString(dst, g.GroupID)
	dst = appendString(dst, g.GroupState)
	dst = appendString(dst, g.ProtocolType)
	dst = appendString(dst, g.ProtocolData)
	return appendArray(dst, g.Members)
}

func (m *DescribedGroupMember) appendTo(dst []byte) []byte {
	dst = appendString(dst, m.MemberID)
	dst = appendNullableString(dst, m.GroupInstanceID)
	dst = appendString(dst, m.ClientID)
	dst = appendString(dst, m.ClientHost)
	dst = appendBytes(dst, m.MemberMetadata)
	return appendBytes(dst, m.MemberAssignment)
}
