package wire

// ListGroups (key 16) lists the consumer groups a coordinator knows.
//
// Behavior: Sluice's groups have no membership yet, so a group is known from its first
// committed offset until its last one is deleted (with its topic); each is answered with
// ProtocolType "", Kafka's for a group that only commits offsets. Groups come sorted by id.
// A cluster of several brokers will answer from each coordinator, as Kafka's do, and a
// client merges the answers.

// ListGroupsRequest asks for every group; it has no fields.
type ListGroupsRequest struct{}

// Key returns ListGroups.
func (*ListGroupsRequest) Key() APIKey { return ListGroups }

// AppendTo appends the body's encoding (nothing).
func (*ListGroupsRequest) AppendTo(dst []byte) []byte { return dst }

// ReadFrom decodes b into l (see Message): b must be empty.
func (*ListGroupsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	return r.done()
}

// ListGroupsResponse lists the groups.
type ListGroupsResponse struct {
	ThrottleMs int32
	ErrorCode  ErrorCode
	Groups     []ListedGroup
}

// ListedGroup is one group.
type ListedGroup struct {
	GroupID      string
	ProtocolType string // "" for a group that only commits offsets
}

const minListedGroup = sizeString * 2

// Key returns ListGroups.
func (*ListGroupsResponse) Key() APIKey { return ListGroups }

// AppendTo appends the body's encoding.
func (l *ListGroupsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, l.ThrottleMs)
	dst = appendInt16(dst, int16(l.ErrorCode))
	return appendArray(dst, l.Groups)
}

// ReadFrom decodes b into l (see Message).
func (l *ListGroupsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	l.ThrottleMs = r.int32()
	l.ErrorCode = ErrorCode(r.int16())
	l.Groups = readSlice(&r, l.Groups, minListedGroup)
	for i := range l.Groups {
		g := &l.Groups[i]
		g.GroupID = r.stringReuse(g.GroupID)
		g.ProtocolType = r.stringReuse(g.ProtocolType)
	}
	return r.done()
}

func (g *ListedGroup) appendTo(dst []byte) []byte {
	dst = appendString(dst, g.GroupID)
	return appendString(dst, g.ProtocolType)
}
