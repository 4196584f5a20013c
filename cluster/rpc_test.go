package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
)

// TestReadFrameLengthIsNotTrusted: a frame header claiming the largest frame, followed by
// nothing, fails as a short frame without this node allocating the size the header claims (a
// peer could otherwise make every controller allocate 64 MiB per connection for 4 bytes).
func TestReadFrameLengthIsNotTrusted(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], maxRPCFrame)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var req rpcRequest
	err := readFrame(bytes.NewReader(append(hdr[:], `{"op":`...)), &req)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("readFrame of a short frame: %v, want io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > maxRPCFrame/8 {
		t.Fatalf("readFrame allocated %d bytes for a frame of 6 bytes claiming %d", got, maxRPCFrame)
	}
}
