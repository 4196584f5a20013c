package wire

// FetchShared (key 9002) lets a consumer on the broker's host read records
// from the broker's segment files itself instead of through the socket.
// Sluice's own api, like AttachMemory and ProduceShared.
//
// Behavior: the request is a Fetch request followed by SpanMaxBytes, and the
// broker reads each partition as for Fetch (the same offsets, high watermark,
// long poll, errors). Where a partition's records are at least the broker's
// span threshold and lie in a file the client could open, the broker does
// not send them: the partition's records are empty and a FileSpan names them
// instead, up to SpanMaxBytes (rather than PartitionMaxBytes) from one
// segment file: its path, its device and inode numbers (so that a client
// opening the path can tell it reached the same file, not a replacement or a
// file of another mount namespace), and the byte range. Everything in the
// range is below the high watermark when the broker answers, starts with the
// batch that holds the fetch offset, and may end in a partial batch, exactly
// as a Fetch response's records. Partitions without a span carry their
// records inline as in Fetch. Spans do not count against MaxBytes (nothing
// of them travels), but they do count towards MinBytes.
//
// A client must be ready for the file to be gone (retention deleted it, a
// compaction replaced it) or shorter than the range (truncated) when it gets
// there: then it fetches the partition again. A broker serves FetchShared only
// on unix-socket connections; on others it answers INVALID_REQUEST.

// FetchShared is Sluice's api key for FetchShared.
const FetchShared APIKey = 9002

// FetchSharedRequest is a Fetch request whose large partition reads may be
// answered with file spans.
type FetchSharedRequest struct {
	FetchRequest
	// SpanMaxBytes bounds one partition's span; PartitionMaxBytes still bounds
	// records sent inline.
	SpanMaxBytes int32
}

// Key returns FetchShared.
func (*FetchSharedRequest) Key() APIKey { return FetchShared }

// AppendTo appends the body's encoding.
func (f *FetchSharedRequest) AppendTo(dst []byte) []byte {
	dst = f.FetchRequest.AppendTo(dst)
	return appendInt32(dst, f.SpanMaxBytes)
}

// ReadFrom decodes b into f (see Message).
func (f *FetchSharedRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	f.FetchRequest.readFrom(&r)
	f.SpanMaxBytes = r.int32()
	return r.done()
}

// FileSpan is where one partition's records lie in a segment file.
type FileSpan struct {
	// Index is the partition's place in the response, counting partitions in
	// encoding order, topic by topic, from 0.
	Index int32
	Path  string // absolute
	Dev   uint64 // the file's device and inode numbers, as stat(2) gives them
	Ino   uint64
	Pos   int64
	Len   int32
}

const minFileSpan = sizeInt32 + sizeString + sizeInt64*3 + sizeInt32

func (s *FileSpan) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, s.Index)
	dst = appendString(dst, s.Path)
	dst = appendInt64(dst, int64(s.Dev))
	dst = appendInt64(dst, int64(s.Ino))
	dst = appendInt64(dst, s.Pos)
	return appendInt32(dst, s.Len)
}

func (s *FileSpan) readFrom(r *reader) {
	s.Index = r.int32()
	s.Path = r.stringReuse(s.Path)
	s.Dev = uint64(r.int64())
	s.Ino = uint64(r.int64())
	s.Pos = r.int64()
	s.Len = r.int32()
}

// FetchSharedResponse is a Fetch response followed by the file spans of the
// partitions whose records it left out.
type FetchSharedResponse struct {
	FetchResponse
	Spans []FileSpan
}

// Key returns FetchShared.
func (*FetchSharedResponse) Key() APIKey { return FetchShared }

// AppendTo appends the body's encoding with the records inline.
func (f *FetchSharedResponse) AppendTo(dst []byte) []byte {
	dst = f.FetchResponse.AppendTo(dst)
	return appendArray(dst, f.Spans)
}

// ReadFrom decodes b into f (see Message). Records alias b.
func (f *FetchSharedResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	f.FetchResponse.readFrom(&r)
	f.Spans = readSlice(&r, f.Spans, minFileSpan)
	for i := range f.Spans {
		f.Spans[i].readFrom(&r)
	}
	return r.done()
}

// AppendFetchSharedResponseFrame is AppendFetchResponseFrame for a
// FetchShared response: the spans follow the last cut, so the server sends
// the pieces exactly as for Fetch.
func AppendFetchSharedResponseFrame(dst []byte, correlationID int32, f *FetchResponse, recordLens []int32, cuts []int, spans []FileSpan) (buf []byte, cutsOut []int, err error) {
	return appendFetchFrame(dst, correlationID, f, recordLens, cuts, spans, true)
}
