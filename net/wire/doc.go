// Package wire is Sluice's binary protocol: frames, request and response
// bodies, and the protocol error codes. It is pure encode/decode: no I/O, no
// goroutines, no reflection. net/server and client own the sockets.
//
// The concepts, api keys and error codes are Kafka's; the encoding is
// simpler (no varints, no tagged fields, no flexible versions).
// docs/protocol.md is the full specification; the layout below is part of
// the format and frozen for version 0.
//
// # Frames
//
//	request:   [size int32][apiKey int16][apiVersion int16][correlationId int32][clientId string][body]
//	response:  [size int32][correlationId int32][body]
//
// size counts the bytes after itself. A reader checks it with ReadFrameSize
// (or ReadResponseFrameSize) before allocating the frame; a request larger
// than MaxRequestBytes (socket.request.max.bytes) or smaller than its header
// closes the connection. Responses come back in request order on a
// connection; correlationId matches them up. A Produce with acks=0 gets no
// response.
//
// # Primitives
//
// All integers are fixed width, big-endian, two's complement.
//
//	int8, int16, int32, int64   1, 2, 4, 8 bytes
//	bool                        1 byte, 0 = false, else true
//	string                      int16 length N, then N bytes of UTF-8; nullable: -1 = null
//	bytes                       int32 length N, then N bytes; -1 = null
//	array of T                  int32 count N, then N elements; nullable: -1 = null
//
// In Go a nullable string is *string (nil = null) and a nullable array or
// bytes field is a nil slice for null and a non-nil empty slice for empty.
// A non-nullable array encodes nil and empty alike (count 0).
//
// # Invariants
//
//   - Decoding is bounded: every length and count is checked against the
//     bytes that remain (a count must be at most remaining / minimum element
//     size) before anything is allocated, so a decoder allocates O(input)
//     whatever the input.
//   - Decoding is exact: a body must end exactly where its layout ends
//     (ErrTrailingBytes otherwise).
//   - Decoding does not copy records: Produce and Fetch record bytes are
//     sub-slices of the frame, valid only while the frame buffer is.
//   - ReadFrom overwrites every field of its receiver and reuses its slices,
//     so one value can decode request after request without allocating.
//   - AppendTo never fails; it panics only on values no valid caller builds
//     (a string over 32767 bytes, a frame over 2 GiB).
//
// # Fetch responses and sendfile
//
// In a Fetch response each partition's records come last in its entry, so a
// server can send the metadata prefixes from memory and the records from the
// segment files with sendfile(2). See FetchResponse.AppendSegments and
// AppendFetchResponseFrame.
//
// # Errors
//
// Decoding errors are the sentinels in errors.go (ErrShortBuffer, ...); they
// mean the connection must be closed. Protocol error codes are ErrorCode
// values, one table in errors.go; an ErrorCode is an error, so
// errors.Is(err, ErrNotLeaderOrFollower) works on what clients return.
package wire
