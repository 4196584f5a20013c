package wire

// DeleteGroups (key 42) deletes consumer groups: what kafka-consumer-groups --delete sends.
//
// Behavior: a group is answered GROUP_ID_NOT_FOUND when the coordinator knows nothing of it,
// and NON_EMPTY_GROUP when it still has members. Sluice's groups have no membership yet, so a
// group is its committed offsets, and deleting it deletes them (a tombstone for each in
// __consumer_offsets, durable as a commit is). Results come in the request's order; a group
// named twice is answered twice.

// DeleteGroupsRequest names the groups to delete.
type DeleteGroupsRequest struct {
	Groups []string
}

// Key returns DeleteGroups.
func (*DeleteGroupsRequest) Key() APIKey { return DeleteGroups }

// AppendTo appends the body's encoding.
func (d *DeleteGroupsRequest) AppendTo(dst []byte) []byte { return appendStrings(dst, d.Groups) }

// ReadFrom decodes b into d (see Message).
func (d *DeleteGroupsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	d.Groups = r.strings(d.Groups)
	return r.done()
}

// DeleteGroupsResponse has one result per group asked for.
type DeleteGroupsResponse struct {
	ThrottleMs int32
	Results    []DeleteGroupsResult
}

// DeleteGroupsResult is one group's outcome.
type DeleteGroupsResult struct {
	GroupID   string
	ErrorCode ErrorCode
}

const minDeleteGroupsResult = sizeString + sizeInt16

// Key returns DeleteGroups.
func (*DeleteGroupsResponse) Key() APIKey { return DeleteGroups }

// AppendTo appends the body's encoding.
func (d *DeleteGroupsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, d.ThrottleMs)
	return appendArray(dst, d.Results)
}

// ReadFrom decodes b into d (see Message).
func (d *DeleteGroupsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	d.ThrottleMs = r.int32()
	d.Results = readSlice(&r, d.Results, minDeleteGroupsResult)
	for i := range d.Results {
		g := &d.Results[i]
		g.GroupID = r.stringReuse(g.GroupID)
		g.ErrorCode = ErrorCode(r.int16())
	}
	return r.done()
}

func (g *DeleteGroupsResult) appendTo(dst []byte) []byte {
	dst = appendString(dst, g.GroupID)
	return appendInt16(dst, int16(g.ErrorCode))
}
