package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
)

// kibBatch is one batch of 1 KiB records, about size bytes.
func kibBatch(b *testing.B, size int) []byte {
	bl := batch.NewBuilder(batch.DefaultBuilderOptions())
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for bl.EstimatedSize()+1100 <= size {
		bl.Append(&batch.Record{Timestamp: 1, Value: value})
	}
	out, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	return append([]byte(nil), out...)
}

func benchBroker(b *testing.B) (*Broker, map[string]string) {
	cfg := testConfig(b, b.TempDir())
	cfg.UnixPath = filepath.Join(cfg.DataDir, "b.sock")
	br := startBroker(b, cfg)
	return br, map[string]string{"tcp": br.Addr().String(), "unix": "unix://" + br.UnixAddr().String()}
}

// BenchmarkProduce sends pre-built 1 MiB requests (64 batches of 16 KiB of 1 KiB records) with
// acks=1 and 5 requests in flight, as a producer with max.in.flight=5 would.
func BenchmarkProduce(b *testing.B) {
	for _, tr := range []string{"tcp", "unix"} {
		b.Run(tr, func(b *testing.B) {
			br, addrs := benchBroker(b)
			c := dial(b, addrs[tr])
			createTopic(b, c, "p", 1)
			one := kibBatch(b, 16<<10)
			var req []byte
			for range 64 {
				req = append(req, one...)
			}
			_ = br
			b.SetBytes(int64(len(req)))
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			work := make(chan struct{})
			for range 5 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := make([]byte, len(req))
					var resp wire.ProduceResponse
					for range work {
						copy(buf, req)
						err := c.Call(context.Background(), &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 30000, Topics: []wire.ProduceRequestTopic{
							{Topic: "p", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: buf}}},
						}}, &resp)
						if err != nil || resp.Topics[0].Partitions[0].ErrorCode != wire.NoError {
							b.Errorf("produce: %v %v", err, resp.Topics[0].Partitions[0].ErrorCode)
						}
					}
				}()
			}
			for i := 0; i < b.N; i++ {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			b.StopTimer()
			if _, err := br.partition("p", 0).log().DeleteExpired(br.partition("p", 0).highWatermark()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// fillTopic writes total bytes of 16 KiB batches to partition 0 of topic.
func fillTopic(b *testing.B, br *Broker, topic string, total int) {
	p := br.partition(topic, 0)
	one := kibBatch(b, 16<<10)
	buf := make([]byte, len(one))
	for written := 0; written < total; written += len(one) {
		copy(buf, one)
		if _, err := p.log().Append(buf, 0); err != nil {
			b.Fatal(err)
		}
	}
	reportAppends(b, br, p)
}

// BenchmarkFetch reads 1 KiB-record batches from the page cache with fetches of 16 KiB (one
// batch: a consumer or follower at the log's tail, where per-fetch costs dominate), 1 MiB (Kafka's
// max.partition.fetch.bytes) and 8 MiB, with one request in flight (a plain consumer) and with
// two (a consumer whose next fetch is already in flight), reading responses into a reused
// buffer: the broker's side is what is measured, next to BenchmarkSendfileLimit, a plain
// sendfile of the same kind of file to the same kind of socket.
//
// The check variants also do a consumer's per-byte work on each response (the CRC of every batch,
// then every record decoded), on the reading goroutine, with 1 MiB fetches and up to eight in
// flight: how much a consumer that could keep several fetches of one partition in flight would
// gain (today's keeps one, and works on the previous response meanwhile: inflight=2 here is
// close to it). A consumer cannot do that yet: it learns where a fetch ends only from its
// response, so the next fetch's offset is unknown until then (BENCHMARKS.md, Consume).
func BenchmarkFetch(b *testing.B) {
	const logBytes = 256 << 20
	for _, tr := range []string{"tcp", "unix"} {
		for _, fetchSize := range []int32{16 << 10, 1 << 20, 8 << 20} {
			for _, depth := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/fetch=%dKiB/inflight=%d", tr, fetchSize>>10, depth), func(b *testing.B) {
					benchFetch(b, tr, fetchSize, depth, logBytes, false)
				})
			}
		}
		for _, depth := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("%s/fetch=1024KiB/inflight=%d/check", tr, depth), func(b *testing.B) {
				benchFetch(b, tr, 1<<20, depth, logBytes, true)
			})
		}
	}
}

// consumeRecords does a consumer's work on a response's records: every whole batch's CRC checked,
// then each record decoded. It returns the bytes of record values.
func consumeRecords(b *testing.B, recs []byte) int {
	n := 0
	var rec batch.Record
	for len(recs) > 0 {
		bt, rest, err := batch.Next(recs)
		if errors.Is(err, batch.ErrShort) {
			break // the partial batch a fetch may end with
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := bt.Validate(); err != nil {
			b.Fatal(err)
		}
		it := bt.Iter(batch.IterOptions{})
		for it.Next(&rec) {
			n += len(rec.Value)
		}
		if err := it.Err(); err != nil {
			b.Fatal(err)
		}
		recs = rest
	}
	return n
}

func benchFetch(b *testing.B, tr string, fetchSize int32, depth, logBytes int, check bool) {
	br, addrs := benchBroker(b)
	c := dial(b, addrs[tr])
	createTopic(b, c, "f", 1)
	one := kibBatch(b, 16<<10)
	fillTopic(b, br, "f", logBytes)
	// Every batch is the same, so where a fetch's whole batches end is known in advance: that
	// lets the benchmark keep depth requests in flight without waiting for the previous answer.
	perBatch := int64(batch.Batch(one).NumRecords())
	step := int64(int(fetchSize)/len(one)) * perBatch
	end := int64(br.partition("f", 0).log().EndOffset())
	network, address, _ := client.ParseAddress(addrs[tr])
	nc, err := net.Dial(network, address)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	frame := make([]byte, 2*int(fetchSize))
	var reqBuf []byte
	var resp wire.FetchResponse
	next := int64(0)
	send := func(id int) int64 {
		if next+step > end {
			next = 0
		}
		off := next
		next += step
		req := wire.FetchRequest{ReplicaID: -1, MaxBytes: fetchSize, Topics: []wire.FetchRequestTopic{
			{Topic: "f", Partitions: []wire.FetchRequestPartition{{Partition: 0, FetchOffset: off, PartitionMaxBytes: fetchSize, CurrentLeaderEpoch: -1, LogStartOffset: -1}}},
		}}
		reqBuf = wire.AppendRequestFrame(reqBuf[:0], &wire.RequestHeader{APIKey: wire.Fetch, CorrelationID: int32(id)}, &req)
		if _, err := nc.Write(reqBuf); err != nil {
			b.Fatal(err)
		}
		return off
	}
	var inflight []int64
	b.ReportAllocs()
	b.ResetTimer()
	var total int64
	for i := 0; i < b.N; i++ {
		for len(inflight) < depth {
			inflight = append(inflight, send(i+len(inflight)))
		}
		want := inflight[0]
		inflight = inflight[1:]
		// Read straight into frame (no bufio): one copy from the socket, as the limit's reader.
		if _, err := io.ReadFull(nc, frame[:4]); err != nil {
			b.Fatal(err)
		}
		n := int(binary.BigEndian.Uint32(frame))
		if _, err := io.ReadFull(nc, frame[:n]); err != nil {
			b.Fatal(err)
		}
		var rh wire.ResponseHeader
		body, err := rh.ReadFrom(frame[:n])
		if err != nil {
			b.Fatal(err)
		}
		if err := resp.ReadFrom(body); err != nil {
			b.Fatal(err)
		}
		recs := resp.Topics[0].Partitions[0].Records
		if bt, _, err := batch.Next(recs); err != nil || int64(bt.BaseOffset()) != want {
			b.Fatalf("fetch at %d: %v", want, err)
		}
		total += int64(len(recs))
		if check && consumeRecords(b, recs) == 0 {
			b.Fatalf("fetch at %d: no records decoded", want)
		}
	}
	b.StopTimer()
	for range inflight { // drain, so the broker's Close does not wait on unread responses
		if _, err := io.ReadFull(nc, frame[:4]); err != nil {
			break
		}
		if _, err := io.ReadFull(nc, frame[:binary.BigEndian.Uint32(frame)]); err != nil {
			break
		}
	}
	b.SetBytes(total / int64(b.N))
}

// BenchmarkSendfileLimit is the physical reference for BenchmarkFetch: sendfile(2) calls of
// 1 MiB from a page-cached file to a socket whose reader discards into a reused buffer.
func BenchmarkSendfileLimit(b *testing.B) {
	const fileBytes = 256 << 20
	path := filepath.Join(b.TempDir(), "data")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for range fileBytes / len(chunk) {
		if _, err := f.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	for _, tr := range []string{"tcp", "unix"} {
		b.Run(tr, func(b *testing.B) {
			network, address := "tcp", "127.0.0.1:0"
			if tr == "unix" {
				network, address = "unix", filepath.Join(b.TempDir(), "l.sock")
			}
			ln, err := net.Listen(network, address)
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				buf := make([]byte, 1<<20)
				for {
					if _, err := conn.Read(buf); err != nil {
						return
					}
				}
			}()
			nc, err := net.Dial(network, ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			// The same socket send buffer as the broker's connections (net/server's default).
			if err := nc.(interface{ SetWriteBuffer(int) error }).SetWriteBuffer(server.DefaultSendBufferBytes); err != nil {
				b.Fatal(err)
			}
			raw, err := nc.(syscall.Conn).SyscallConn()
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(1 << 20)
			b.ResetTimer()
			var off int64
			for i := 0; i < b.N; i++ {
				if off >= fileBytes {
					off = 0
				}
				left := 1 << 20
				var serr error
				err := raw.Write(func(fd uintptr) bool {
					for left > 0 {
						n, err := unix.Sendfile(int(fd), int(f.Fd()), &off, left)
						if err == unix.EAGAIN {
							return false
						}
						if err != nil {
							serr = err
							return true
						}
						left -= n
					}
					return true
				})
				if err != nil || serr != nil {
					b.Fatal(err, serr)
				}
			}
			b.StopTimer()
			nc.Close()
			<-done
		})
	}
	f.Close()
}
