package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// Golden bytes, written by hand from docs/protocol.md, pin the layout.

func TestRequestHeaderGolden(t *testing.T) {
	h := RequestHeader{APIKey: Metadata, APIVersion: 0, CorrelationID: 0x01020304, ClientID: "cli"}
	want := []byte{
		0x00, 0x03, // apiKey 3 (Metadata)
		0x00, 0x00, // apiVersion 0
		0x01, 0x02, 0x03, 0x04, // correlationId
		0x00, 0x03, 'c', 'l', 'i', // clientId
	}
	got := h.AppendTo(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
	var back RequestHeader
	body, err := back.ReadFrom(append(got, 0xAA, 0xBB))
	if err != nil || back != h || !bytes.Equal(body, []byte{0xAA, 0xBB}) {
		t.Fatalf("ReadFrom = %+v, % x, %v", back, body, err)
	}
}

func TestProduceRequestFrameGolden(t *testing.T) {
	h := RequestHeader{APIKey: Produce, CorrelationID: 7, ClientID: "c"}
	req := ProduceRequest{TransactionalID: nil, Acks: AcksAll, TimeoutMs: 1000, Topics: []ProduceRequestTopic{
		{Topic: "t", Partitions: []ProduceRequestPartition{{Partition: 2, Records: []byte("abc")}}},
	}}
	want := []byte{
		0x00, 0x00, 0x00, 0x29, // size 41 = 11 header + 30 body
		0x00, 0x00, // apiKey 0 (Produce)
		0x00, 0x00, // apiVersion 0
		0x00, 0x00, 0x00, 0x07, // correlationId 7
		0x00, 0x01, 'c', // clientId "c"
		0xff, 0xff, // transactionalId null
		0xff, 0xff, // acks -1
		0x00, 0x00, 0x03, 0xe8, // timeoutMs 1000
		0x00, 0x00, 0x00, 0x01, // topics count 1
		0x00, 0x01, 't', // topic "t"
		0x00, 0x00, 0x00, 0x01, // partitions count 1
		0x00, 0x00, 0x00, 0x02, // partition 2
		0x00, 0x00, 0x00, 0x03, 'a', 'b', 'c', // records
	}
	got := AppendRequestFrame(nil, &h, &req)
	if !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}

	// And back: size, header, body.
	n, err := ReadFrameSize([4]byte(got[:4]), MaxRequestBytes)
	if err != nil || n != len(got)-4 {
		t.Fatalf("ReadFrameSize = %d, %v", n, err)
	}
	var h2 RequestHeader
	body, err := h2.ReadFrom(got[4:])
	if err != nil || h2 != h {
		t.Fatalf("header %+v, %v", h2, err)
	}
	r, err := NewRequest(h2.APIKey, h2.APIVersion)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	rec := r.(*ProduceRequest).Topics[0].Partitions[0].Records
	if &rec[0] != &got[len(got)-3] {
		t.Error("decoded records are a copy, want a sub-slice of the frame")
	}
	if cap(rec) != len(rec) {
		t.Error("decoded records are not capped; an append could overwrite the frame")
	}
}

func TestResponseFrame(t *testing.T) {
	got := AppendResponseFrame(nil, 0x0a0b0c0d, &OffsetCommitResponse{ThrottleMs: 1})
	want := []byte{
		0x00, 0x00, 0x00, 0x0c, // size 12
		0x0a, 0x0b, 0x0c, 0x0d, // correlationId
		0x00, 0x00, 0x00, 0x01, // throttleMs
		0x00, 0x00, 0x00, 0x00, // topics count 0
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
	n, err := ReadResponseFrameSize([4]byte(got[:4]), 1<<20)
	if err != nil || n != 12 {
		t.Fatalf("ReadResponseFrameSize = %d, %v", n, err)
	}
	var h ResponseHeader
	body, err := h.ReadFrom(got[4:])
	if err != nil || h.CorrelationID != 0x0a0b0c0d || len(body) != 8 {
		t.Fatalf("header %+v, body % x, %v", h, body, err)
	}
}

func TestReadFrameSize(t *testing.T) {
	size := func(n int32) [4]byte {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(n))
		return b
	}
	cases := []struct {
		n       int32
		max     int
		resp    bool
		wantErr error
	}{
		{MinRequestHeaderLen - 1, MaxRequestBytes, false, ErrFrameTooSmall},
		{MinRequestHeaderLen, MaxRequestBytes, false, nil},
		{MaxRequestBytes, MaxRequestBytes, false, nil},
		{MaxRequestBytes + 1, MaxRequestBytes, false, ErrFrameTooLarge},
		{-1, MaxRequestBytes, false, ErrFrameTooSmall},
		{-1 << 31, MaxRequestBytes, false, ErrFrameTooSmall},
		{1<<31 - 1, MaxRequestBytes, false, ErrFrameTooLarge},
		{ResponseHeaderLen - 1, 100, true, ErrFrameTooSmall},
		{ResponseHeaderLen, 100, true, nil},
		{101, 100, true, ErrFrameTooLarge},
	}
	for _, c := range cases {
		var got int
		var err error
		if c.resp {
			got, err = ReadResponseFrameSize(size(c.n), c.max)
		} else {
			got, err = ReadFrameSize(size(c.n), c.max)
		}
		if !errors.Is(err, c.wantErr) || (err == nil && got != int(c.n)) {
			t.Errorf("size %d (resp %v): got %d, %v; want %v", c.n, c.resp, got, err, c.wantErr)
		}
	}
}

func TestFinishFrame(t *testing.T) {
	buf, start := BeginFrame([]byte("xx"))
	buf = append(buf, 1, 2, 3)
	if err := FinishFrame(buf, start, 10); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(buf[start:]); got != 13 {
		t.Fatalf("size = %d, want 13", got)
	}
	if err := FinishFrame(buf, start, 1<<31); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("overflow: %v", err)
	}
	if err := FinishFrame(buf, start, -1); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("negative extra: %v", err)
	}
}

func TestRequestHeaderReuseNoAlloc(t *testing.T) {
	frame := (&RequestHeader{APIKey: Fetch, CorrelationID: 1, ClientID: "consumer-1"}).AppendTo(nil)
	var h RequestHeader
	if _, err := h.ReadFrom(frame); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := h.ReadFrom(frame); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("reused header decode: %v allocs, want 0", allocs)
	}
}
