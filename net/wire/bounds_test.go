package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
	"time"
)

// TestHugeCountFailsFast: a count of 2^31-1 in a 10-byte body must be
// rejected before any allocation, for every array in every position we can
// reach cheaply: the first array of each message, and a nested one.
func TestHugeCountFailsFast(t *testing.T) {
	huge := func(prefix ...byte) []byte {
		b := append([]byte(nil), prefix...)
		b = binary.BigEndian.AppendUint32(b, 1<<31-1)
		for len(b) < len(prefix)+10 {
			b = append(b, 0)
		}
		return b
	}
	cases := []struct {
		name string
		msg  Message
		body []byte
	}{
		// ProduceRequest: txid null, acks, timeout, then the topics count.
		{"produce topics", &ProduceRequest{}, huge(0xff, 0xff, 0, 1, 0, 0, 0, 0)},
		// One topic "t", then the partitions count.
		{"produce partitions", &ProduceRequest{}, huge(0xff, 0xff, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 't')},
		{"fetch request topics", &FetchRequest{}, huge(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
		{"fetch response topics", &FetchResponse{}, huge(0, 0, 0, 0, 0, 0)},
		{"metadata request topics", &MetadataRequest{}, huge()},
		{"metadata response brokers", &MetadataResponse{}, huge(0, 0, 0, 0)},
		{"create topics", &CreateTopicsRequest{}, huge()},
		{"delete topics", &DeleteTopicsRequest{}, huge()},
		{"describe configs", &DescribeConfigsRequest{}, huge()},
		{"alter configs", &AlterConfigsRequest{}, huge()},
		{"list offsets", &ListOffsetsRequest{}, huge(0, 0, 0, 0, 0)},
		{"offset commit", &OffsetCommitRequest{}, huge(0, 0, 0, 0, 0, 0, 0, 0)},
		{"offset fetch", &OffsetFetchRequest{}, huge(0, 0)},
		{"api versions", &APIVersionsResponse{}, huge(0, 0)},
	}
	for _, c := range cases {
		start := time.Now()
		err := c.msg.ReadFrom(c.body)
		if !errors.Is(err, ErrShortBuffer) {
			t.Errorf("%s: err = %v, want ErrShortBuffer", c.name, err)
		}
		// Loose: wall time on a loaded machine is noisy. The bytes below
		// are what shows an allocation sized by the count.
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v", c.name, d)
		}
		allocs := testing.AllocsPerRun(10, func() { _ = fresh(c.msg).ReadFrom(c.body) })
		// One allocation is fresh() itself; "produce partitions" also
		// allocates its one-topic slice and topic name honestly.
		if allocs > 3 {
			t.Errorf("%s: %v allocs", c.name, allocs)
		}
		// A few allocations may still be big ones: a slice made for the
		// count, even capped, takes far more than the message itself.
		if n := bytesPerRun(10, func() { _ = fresh(c.msg).ReadFrom(c.body) }); n > 1<<10 {
			t.Errorf("%s: %d bytes allocated", c.name, n)
		}
	}
	// The produce request decodes into a reused value with zero allocations.
	var p ProduceRequest
	body := huge(0xff, 0xff, 0, 1, 0, 0, 0, 0)
	if n := testing.AllocsPerRun(10, func() { _ = p.ReadFrom(body) }); n != 0 {
		t.Errorf("reused produce decode of a huge count: %v allocs", n)
	}
}

// bytesPerRun is the average number of heap bytes allocated by a call of f,
// as testing.AllocsPerRun counts allocations (after one warm-up call).
func bytesPerRun(runs int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// TestHugeLengths: string and bytes lengths beyond the input fail the same
// way, and negative lengths other than -1 are invalid.
func TestHugeLengths(t *testing.T) {
	var p ProduceRequest
	if err := p.ReadFrom([]byte{0x7f, 0xff, 0, 0}); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("long string: %v", err)
	}
	if err := p.ReadFrom([]byte{0xff, 0xfe, 0, 0}); !errors.Is(err, ErrInvalidLength) {
		t.Errorf("string length -2: %v", err)
	}
	var ct CreateTopicsRequest
	if err := ct.ReadFrom(append([]byte{0, 0, 0, 1, 0xff, 0xff}, make([]byte, 20)...)); !errors.Is(err, ErrInvalidLength) {
		t.Errorf("null non-nullable string: %v", err)
	}
	if err := ct.ReadFrom([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0}); !errors.Is(err, ErrInvalidLength) {
		t.Errorf("null non-nullable array: %v", err)
	}
	body := []byte{0xff, 0xff, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1, 0, 0, 0, 0}
	if err := p.ReadFrom(append(body, 0x7f, 0xff, 0xff, 0xff)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("long records: %v", err)
	}
	if err := p.ReadFrom(append(body, 0xff, 0xff, 0xff, 0xfe)); !errors.Is(err, ErrInvalidLength) {
		t.Errorf("records length -2: %v", err)
	}
}

// TestTruncatedAtEveryByte: every proper prefix of every sample's encoding
// is an error (never a panic, never a silent success), and so is every
// sample with a byte appended.
func TestTruncatedAtEveryByte(t *testing.T) {
	for _, s := range samples() {
		enc := s.msg.AppendTo(nil)
		for i := range len(enc) {
			if err := fresh(s.msg).ReadFrom(enc[:i]); err == nil {
				t.Errorf("%s: prefix of %d/%d bytes decoded without error", s.name, i, len(enc))
			}
		}
		if err := fresh(s.msg).ReadFrom(append(bytes.Clone(enc), 0)); !errors.Is(err, ErrTrailingBytes) {
			t.Errorf("%s: trailing byte: %v", s.name, err)
		}
	}
	// Headers too.
	h := (&RequestHeader{APIKey: Produce, CorrelationID: 1, ClientID: "abc"}).AppendTo(nil)
	for i := range len(h) {
		var rh RequestHeader
		if _, err := rh.ReadFrom(h[:i]); err == nil {
			t.Errorf("request header prefix %d decoded", i)
		}
	}
	var resp ResponseHeader
	if _, err := resp.ReadFrom([]byte{1, 2, 3}); err == nil {
		t.Error("short response header decoded")
	}
}

func TestStringTooLongPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for a 32768-byte string")
		}
	}()
	(&DeleteTopicsRequest{Topics: []string{string(make([]byte, 1<<15))}}).AppendTo(nil)
}
