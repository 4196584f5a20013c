package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"runtime"
	"testing"
	"time"
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

// TestJoinRefusesVoterID: a join naming a voter's id is refused and leaves the raft
// configuration as it was (raft would have moved that voter to the address in the request).
func TestJoinRefusesVoterID(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	leader := tc.node(tc.leader())
	victim := tc.follower()
	before := leader.raft.GetConfiguration()
	if err := before.Error(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := leader.handle(ctx, &rpcRequest{Op: opJoin, BrokerID: victim, Addr: "127.0.0.1:1"})
	if !errors.Is(err, ErrInvalidBroker) {
		t.Fatalf("join with voter %d's id: %v, want ErrInvalidBroker", victim, err)
	}
	after := leader.raft.GetConfiguration()
	if err := after.Error(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before.Configuration(), after.Configuration()) {
		t.Fatalf("raft configuration changed by a refused join: %+v, was %+v", after.Configuration(), before.Configuration())
	}
}
