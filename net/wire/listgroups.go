package wire

// ListGroups (key 16) lists the consumer groups a coordinator knows.
//
// Behavior: every broker answers with the groups it coordinates (a client asks each and merges
// the answers, as Kafka's do), sorted by id: every group with members, a snapshot or a
// committed offset, with its protocol type ("" for a group that only commits offsets) and, in
// v1, its state (Empty, PreparingRebalance, CompletingRebalance, Stable). v1's StatesFilter
// keeps only the groups in those states (empty: all).

// ListGroupsRequest asks for the groups.
type ListGroupsRequest struct {
	Version      int16    // 0 or 1
	StatesFilter []string // v1+
}

// APIVersion implements Versioned.
func (l *ListGroupsRequest) APIVersion() int16 { return l.Version }

// Key returns ListGroups.
func (*ListGroupsRequest) Key() APIKey { return ListGroups }

// AppendTo appends the body's encoding (nothing in v0).
func (l *ListGroupsRequest) AppendTo(dst []byte) []byte {
	if l.Version >= 1 {
		dst = appendStrings(dst, l.StatesFilter)
	}
	return dst
}

// ReadFrom decodes b into l (see Message), in the layout of l.Version.
func (l *ListGroupsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	l.StatesFilter = l.StatesFilter[:0]
	if l.Version >= 1 {
		l.StatesFilter = r.strings(l.StatesFilter)
	}
	return r.done()
}

// ListGroupsResponse lists the groups.
type ListGroupsResponse struct {
	Version    int16 // the layout: the version of the request it answers
	ThrottleMs int32
	ErrorCode  ErrorCode
	Groups     []ListedGroup
}

// ListedGroup is one group.
type ListedGroup struct {
	GroupID      string
	ProtocolType string // "" for a group that only commits offsets
	GroupState   string // v1+
}

const minListedGroup = sizeString * 2

// Key returns ListGroups.
func (*ListGroupsResponse) Key() APIKey { return ListGroups }

// AppendTo appends the body's encoding.
func (l *ListGroupsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, l.ThrottleMs)
	dst = appendInt16(dst, int16(l.ErrorCode))
	dst = appendArrayLen(dst, len(l.Groups))
	for i := range l.Groups {
		g := &l.Groups[i]
		dst = appendString(dst, g.GroupID)
		dst = appendString(dst, g.ProtocolType)
		if l.Version >= 1 {
			dst = appendString(dst, g.GroupState)
		}
	}
	return dst
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
		g.GroupState = ""
		if l.Version >= 1 {
			g.GroupState = r.stringReuse(g.GroupState)
		}
	}
	return r.done()
}
