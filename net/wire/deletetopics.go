package wire

// DeleteTopics (key 20) deletes topics on the controller.
//
// Behavior: results are per topic, in request order. A topic that does not
// exist gets ErrUnknownTopicOrPartition; if delete.topic.enable is false
// every topic gets ErrTopicDeletionDisabled. TimeoutMs bounds how long the
// controller waits for the deletion to be applied; the answer is
// ErrRequestTimedOut when it expires first (the deletion still completes).

// DeleteTopicsRequest deletes topics by name.
type DeleteTopicsRequest struct {
	Topics    []string
	TimeoutMs int32
}

// Key returns DeleteTopics.
func (*DeleteTopicsRequest) Key() APIKey { return DeleteTopics }

// AppendTo appends the body's encoding.
func (d *DeleteTopicsRequest) AppendTo(dst []byte) []byte {
	dst = appendStrings(dst, d.Topics)
	return appendInt32(dst, d.TimeoutMs)
}

// ReadFrom decodes b into d (see Message).
func (d *DeleteTopicsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	d.Topics = r.strings(d.Topics)
	d.TimeoutMs = r.int32()
	return r.done()
}

// DeleteTopicsResponse has one result per requested topic.
type DeleteTopicsResponse struct {
	ThrottleMs int32
	Topics     []TopicResult
}

// Key returns DeleteTopics.
func (*DeleteTopicsResponse) Key() APIKey { return DeleteTopics }

// AppendTo appends the body's encoding.
func (d *DeleteTopicsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, d.ThrottleMs)
	return appendArray(dst, d.Topics)
}

// ReadFrom decodes b into d (see Message).
func (d *DeleteTopicsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	d.ThrottleMs = r.int32()
	d.Topics = readSlice(&r, d.Topics, minTopicResult)
	for i := range d.Topics {
		d.Topics[i].readFrom(&r)
	}
	return r.done()
}
