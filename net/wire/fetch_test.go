package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// recordsOf lists the response's records in encoding order with their
// lengths (-1 for null), as a server would know them from the segment reads.
func recordsOf(f *FetchResponse) (blobs [][]byte, lens []int32) {
	for _, t := range f.Topics {
		for _, p := range t.Partitions {
			blobs = append(blobs, p.Records)
			if p.Records == nil {
				lens = append(lens, -1)
			} else {
				lens = append(lens, int32(len(p.Records)))
			}
		}
	}
	return blobs, lens
}

// splice interleaves the segments with the record blobs, as the server's
// write/sendfile sequence does.
func splice(buf []byte, from int, cuts []int, blobs [][]byte) []byte {
	var out []byte
	prev := from
	for i, c := range cuts {
		out = append(out, buf[prev:c]...)
		out = append(out, blobs[i]...)
		prev = c
	}
	return append(out, buf[prev:]...)
}

func TestFetchSegmentsEqualAppendTo(t *testing.T) {
	for _, f := range []*FetchResponse{
		sampleFetchResponse(),
		{ErrorCode: ErrUnknownServerError},
		{Topics: []FetchResponseTopic{{Topic: "one", Partitions: []FetchResponsePartition{{CurrentLeader: NoLeaderHint, Records: bytes.Repeat([]byte{7}, 1000)}}}}},
		sampleFetchResponseV1(),
	} {
		blobs, lens := recordsOf(f)
		want := f.AppendTo(nil)

		// Records must be ignored by the segment encoder: blank them.
		blank := *f
		blank.Topics = append([]FetchResponseTopic(nil), f.Topics...)
		for i := range blank.Topics {
			ps := append([]FetchResponsePartition(nil), blank.Topics[i].Partitions...)
			for j := range ps {
				ps[j].Records = []byte("ignored")
			}
			blank.Topics[i].Partitions = ps
		}

		dst := []byte("keep")
		buf, cuts, err := blank.AppendSegments(dst, lens, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(buf[:4]) != "keep" || len(cuts) != len(lens) {
			t.Fatalf("dst clobbered or %d cuts for %d partitions", len(cuts), len(lens))
		}
		if got := splice(buf, len(dst), cuts, blobs); !bytes.Equal(got, want) {
			t.Fatalf("spliced segments differ from AppendTo\n got % x\nwant % x", got, want)
		}

		// The frame variant: size covers the record bytes it leaves out.
		frame, fcuts, err := AppendFetchResponseFrame(nil, 42, &blank, lens, nil)
		if err != nil {
			t.Fatal(err)
		}
		full := splice(frame, 0, fcuts, blobs)
		if !bytes.Equal(full, AppendResponseFrame(nil, 42, f)) {
			t.Fatal("spliced frame differs from AppendResponseFrame")
		}
		if size := binary.BigEndian.Uint32(full); int(size) != len(full)-4 {
			t.Fatalf("frame size %d, frame is %d bytes after the size", size, len(full)-4)
		}
		var h ResponseHeader
		body, _ := h.ReadFrom(full[4:])
		back := FetchResponse{Version: f.Version}
		if err := back.ReadFrom(body); err != nil || !reflect.DeepEqual(&back, f) {
			t.Fatalf("decode of spliced frame: %v\n got %+v\nwant %+v", err, &back, f)
		}
	}
}

func TestFetchSegmentsBadLens(t *testing.T) {
	f := sampleFetchResponse()
	_, lens := recordsOf(f)
	dst := []byte("x")
	for _, bad := range [][]int32{lens[1:], append(append([]int32(nil), lens...), 1), {-2, 0, 0, 0}} {
		buf, cuts, err := f.AppendSegments(dst, bad, nil)
		if !errors.Is(err, ErrRecordLens) || !bytes.Equal(buf, dst) || len(cuts) != 0 {
			t.Errorf("lens %v: got %v, % x, %v", bad, err, buf, cuts)
		}
	}
	// A frame whose records would overflow the int32 size field.
	big := &FetchResponse{Topics: []FetchResponseTopic{{Partitions: make([]FetchResponsePartition, 2)}}}
	if _, _, err := AppendFetchResponseFrame(nil, 1, big, []int32{1<<31 - 1, 1<<31 - 1}, nil); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized frame: %v", err)
	}
}

// TestFetchSegmentsNoAlloc: with buffers reused, encoding the prefixes of a
// response allocates nothing.
func TestFetchSegmentsNoAlloc(t *testing.T) {
	for _, f := range []*FetchResponse{sampleFetchResponse(), sampleFetchResponseV1()} {
		fetchSegmentsNoAlloc(t, f)
	}
}

func fetchSegmentsNoAlloc(t *testing.T, f *FetchResponse) {
	_, lens := recordsOf(f)
	buf := make([]byte, 0, 4096)
	cuts := make([]int, 0, 16)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		buf, cuts, err = AppendFetchResponseFrame(buf[:0], 1, f, lens, cuts[:0])
		if err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocs, want 0", allocs)
	}
}
