package wire

import (
	"fmt"
	"testing"
)

// produceRequest builds a request carrying total bytes of records spread
// over parts partitions of one topic.
func produceRequest(total, parts int) *ProduceRequest {
	records := make([]byte, total)
	for i := range records {
		records[i] = byte(i)
	}
	ps := make([]ProduceRequestPartition, parts)
	for i := range ps {
		ps[i] = ProduceRequestPartition{Partition: int32(i), Records: records[i*total/parts : (i+1)*total/parts]}
	}
	return &ProduceRequest{Acks: AcksAll, TimeoutMs: 30000, Topics: []ProduceRequestTopic{{Topic: "bench-topic", Partitions: ps}}}
}

var benchSizes = []struct {
	name  string
	total int
	parts int
}{
	{"1KiB/1p", 1 << 10, 1},
	{"64KiB/4p", 64 << 10, 4},
	{"1MiB/1p", 1 << 20, 1},
	{"1MiB/16p", 1 << 20, 16},
}

func BenchmarkProduceRequestEncode(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			req := produceRequest(sz.total, sz.parts)
			h := RequestHeader{APIKey: Produce, CorrelationID: 1, ClientID: "bench"}
			buf := AppendRequestFrame(nil, &h, req)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendRequestFrame(buf[:0], &h, req)
			}
		})
	}
}

// BenchmarkProduceRequestDecode decodes into a reused request, as a
// connection's reader does: no allocations and no record copies, so the cost
// is independent of the record bytes.
func BenchmarkProduceRequestDecode(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			body := produceRequest(sz.total, sz.parts).AppendTo(nil)
			var req ProduceRequest
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := req.ReadFrom(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProduceRequestDecodeFresh decodes into a new request each time:
// the allocations are the topic and partition slices and the topic name.
func BenchmarkProduceRequestDecodeFresh(b *testing.B) {
	body := produceRequest(1<<20, 16).AppendTo(nil)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var req ProduceRequest
		if err := req.ReadFrom(body); err != nil {
			b.Fatal(err)
		}
	}
}

func fetchResponse(parts int) (*FetchResponse, []int32) {
	ps := make([]FetchResponsePartition, parts)
	lens := make([]int32, parts)
	for i := range ps {
		ps[i] = FetchResponsePartition{Partition: int32(i), HighWatermark: 1 << 40, LastStableOffset: 1 << 40, LogStartOffset: 0}
		lens[i] = 1 << 20
	}
	return &FetchResponse{Topics: []FetchResponseTopic{{Topic: "bench-topic", Partitions: ps}}}, lens
}

// BenchmarkFetchResponseFrameSegments encodes the in-memory part of a Fetch
// response frame (everything but the records, which go by sendfile). Bytes
// are the prefix bytes produced.
func BenchmarkFetchResponseFrameSegments(b *testing.B) {
	for _, parts := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("%dp", parts), func(b *testing.B) {
			f, lens := fetchResponse(parts)
			buf, cuts, err := AppendFetchResponseFrame(nil, 1, f, lens, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf, cuts, _ = AppendFetchResponseFrame(buf[:0], 1, f, lens, cuts[:0])
			}
		})
	}
}

// BenchmarkFetchResponseDecode is the client side: records alias the frame.
func BenchmarkFetchResponseDecode(b *testing.B) {
	f, _ := fetchResponse(16)
	records := make([]byte, 64<<10)
	for i := range f.Topics[0].Partitions {
		f.Topics[0].Partitions[i].Records = records
	}
	body := f.AppendTo(nil)
	var resp FetchResponse
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := resp.ReadFrom(body); err != nil {
			b.Fatal(err)
		}
	}
}
