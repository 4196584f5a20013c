package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
	"golang.org/x/sys/unix"
)

// rawUnix speaks frames by hand over the broker's unix socket, to send what the client never
// would.
type rawUnix struct {
	t  *testing.T
	nc *net.UnixConn
}

func dialRawUnix(t *testing.T, b *Broker) *rawUnix {
	t.Helper()
	nc, err := net.Dial("unix", b.UnixAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawUnix{t: t, nc: nc.(*net.UnixConn)}
}

// send writes one request frame, with file passed alongside if not nil.
func (r *rawUnix) send(corr int32, req wire.Request, file *os.File) {
	r.t.Helper()
	h := wire.RequestHeader{APIKey: req.Key(), CorrelationID: corr, ClientID: "raw"}
	frame := wire.AppendRequestFrame(nil, &h, req)
	var oob []byte
	if file != nil {
		oob = unix.UnixRights(int(file.Fd()))
	}
	if _, _, err := r.nc.WriteMsgUnix(frame, oob, nil); err != nil {
		r.t.Fatal(err)
	}
}

// recv reads one response and decodes it into resp; it reports false if the broker closed
// the connection instead.
func (r *rawUnix) recv(corr int32, resp wire.Response) bool {
	r.t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(r.nc, size[:]); err != nil {
		return false
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.nc, frame); err != nil {
		r.t.Fatal(err)
	}
	var h wire.ResponseHeader
	body, err := h.ReadFrom(frame)
	if err != nil || h.CorrelationID != corr {
		r.t.Fatalf("response header %+v, want correlation id %d: %v", h, corr, err)
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatal(err)
	}
	return true
}

// attach sends AttachMemory with file and returns the answer.
func (r *rawUnix) attach(corr int32, size int64, file *os.File) wire.AttachMemoryResponse {
	r.t.Helper()
	r.send(corr, &wire.AttachMemoryRequest{Bytes: size}, file)
	var resp wire.AttachMemoryResponse
	if !r.recv(corr, &resp) {
		r.t.Fatal("connection closed on AttachMemory")
	}
	return resp
}

// memfd returns a memfd of size bytes, sealed as given (0: not at all), and its mapping.
func memfd(t *testing.T, size int, seals int) (*os.File, []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	f := os.NewFile(uintptr(fd), "memfd")
	t.Cleanup(func() { f.Close() })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			t.Fatal(err)
		}
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return f, mem
}

// memfdUses counts this process's mappings of memfds named name and its descriptors of them.
func memfdUses(t *testing.T, name string) (mappings, fds int) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, "/memfd:"+name+" ") {
			fds++
		}
	}
	return strings.Count(string(b), "/memfd:"+name+" "), fds
}

// newRegion returns a shared-memory region of size bytes, closed at cleanup (after the
// connections dialled later).
func newRegion(t *testing.T, size int) *client.SharedRegion {
	t.Helper()
	r, err := client.NewSharedRegion(size)
	if err != nil {
		t.Skipf("no shared memory here: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// attachedConn dials b's unix socket and attaches a new shared-memory region of size bytes.
func attachedConn(t *testing.T, b *Broker, size int) (*client.Conn, *client.SharedRegion) {
	t.Helper()
	r := newRegion(t, size)
	c := dial(t, "unix://"+b.UnixAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.AttachSharedMemory(ctx, r); err != nil {
		t.Fatal(err)
	}
	return c, r
}

// placed copies b into the region at off and returns the copy.
func placed(r *client.SharedRegion, off int, b []byte) []byte {
	return r.Bytes()[off : off+copy(r.Bytes()[off:], b)]
}

// Produce requests whose batches lie in a shared-memory region land in the log as they would
// through the socket, while the socket carries only the pointers; the broker unmaps the region
// when the connection ends, the client when it closes the region.
func TestProduceSharedLandsInTheLog(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c, region := attachedConn(t, b, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m, fds := memfdUses(t, "sluice-produce"); m != 2 || fds != 1 {
		t.Fatalf("%d mappings and %d descriptors of the region, want the client's and the broker's mappings and the client's descriptor", m, fds)
	}
	createTopic(t, c, "shm", 1)
	before := b.srv.Stats().BytesRead
	const n = 40
	// Values over server.Config.OverlapBytes (64 KiB): the loaded bodies are served on the
	// overlap goroutine while the reader loads the next.
	value := func(i int) string { return fmt.Sprintf("%03d-%s", i, strings.Repeat("v", 70<<10)) }
	chans := make([]chan error, n)
	for i := range n { // pipelined, eight at a time, each batch in its eighth of the region
		chans[i] = make(chan error, 1)
		recs := placed(region, (i%8)<<17, records(t, value(i)))
		go func(i int) {
			var resp wire.ProduceResponse
			err := c.Call(ctx, &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
				{Topic: "shm", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: recs}}},
			}}, &resp)
			if err == nil && resp.Topics[0].Partitions[0].ErrorCode != wire.NoError {
				err = resp.Topics[0].Partitions[0].ErrorCode
			}
			chans[i] <- err
		}(i)
		if i%8 == 7 { // the region's eighths are free again once their requests are answered
			for j := i - 7; j <= i; j++ {
				if err := <-chans[j]; err != nil {
					t.Fatalf("produce %d: %v", j, err)
				}
			}
		}
	}
	st := b.srv.Stats()
	if read := st.BytesRead - before; read > 20<<10 {
		t.Errorf("the socket carried %d bytes for %d produces of 70 KiB: not through the region", read, n)
	}
	if st.LoadedBytes < n*70<<10 || st.Overlapped < n {
		t.Errorf("%d bytes loaded from the region, %d requests overlapped; want %d produces of 70 KiB, all overlapped", st.LoadedBytes, st.Overlapped, n)
	}
	awaitCommitted(t, c, "shm", 0, n-1) // acks=1: answered before the fsync that commits them
	var got []string
	for int64(len(got)) < n {
		vals := fetchedValues(t, fetchP(t, c, "shm", 0, int64(len(got)), 0, 1).Records)
		if len(vals) == 0 {
			t.Fatalf("nothing fetched at offset %d", len(got))
		}
		got = append(got, vals...)
	}
	seen := map[string]bool{}
	for _, v := range got {
		seen[v] = true
	}
	if len(got) != n {
		t.Fatalf("%d records in the log, want %d", len(got), n)
	}
	for i := range n {
		if !seen[value(i)] {
			t.Fatalf("value %d missing from the log", i)
		}
	}
	c.Close()
	region.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, fds := memfdUses(t, "sluice-produce")
		if m == 0 && fds == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d mappings and %d descriptors of the region left after the connection closed", m, fds)
		}
		time.Sleep(time.Millisecond) // poll interval
	}
}

// AttachMemory refuses what the broker could fault on or should not hold, and the connection
// goes on; ProduceShared that does not point into an attached region closes it.
func TestAttachMemoryRefusals(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.SharedMemoryBytes = 1 << 20
	b := startBroker(t, cfg)
	regular, err := os.CreateTemp(t.TempDir(), "regular")
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	regular.Truncate(4096)
	unsealed, _ := memfd(t, 4096, 0)
	sealed, _ := memfd(t, 4096, unix.F_SEAL_SHRINK)
	large, _ := memfd(t, 2<<20, unix.F_SEAL_SHRINK)
	for _, tc := range []struct {
		name string
		size int64
		file *os.File
		want string
	}{
		{"no descriptor", 4096, nil, "no descriptor"},
		{"regular file", 4096, regular, "not a memfd"},
		{"unsealed memfd", 4096, unsealed, "not a memfd sealed"},
		{"size claimed wrong", 8192, sealed, "size"},
		{"over the limit", 2 << 20, large, "size"},
		{"zero size", 0, sealed, "size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRawUnix(t, b)
			resp := r.attach(1, tc.size, tc.file)
			if resp.ErrorCode != wire.ErrInvalidRequest || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, tc.want) {
				t.Fatalf("got %v %v, want INVALID_REQUEST with %q", resp.ErrorCode, strPtrString(resp.ErrorMessage), tc.want)
			}
			// Refused, the connection goes on, and has no region.
			var md wire.MetadataResponse
			r.send(2, &wire.MetadataRequest{}, nil)
			if !r.recv(2, &md) {
				t.Fatal("connection closed after a refused AttachMemory")
			}
			r.send(3, shared(0, 100), nil)
			if r.recv(3, &wire.ProduceResponse{}) {
				t.Fatal("ProduceShared without a region was answered")
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		cfg := testConfig(t, t.TempDir())
		cfg.SharedMemoryBytes = -1
		b := startBroker(t, cfg)
		resp := dialRawUnix(t, b).attach(1, 4096, sealed)
		if resp.ErrorCode != wire.ErrInvalidRequest || !strings.Contains(strPtrString(resp.ErrorMessage), "off") {
			t.Fatalf("got %v %v, want INVALID_REQUEST: off", resp.ErrorCode, strPtrString(resp.ErrorMessage))
		}
	})
	for _, span := range []wire.SharedPart{
		{Offset: 4000, Length: 97, GuardOffset: -1}, {Offset: -1, Length: 10, GuardOffset: -1}, {Offset: 0, Length: -1, GuardOffset: -1},
		{Offset: 1 << 62, Length: 1 << 30, GuardOffset: -1},
		{Offset: 64, Length: 10, GuardOffset: 4092}, {Offset: 64, Length: 10, GuardOffset: 4}, {Offset: 64, Length: 10, GuardOffset: -2},
	} {
		t.Run(fmt.Sprintf("span %d+%d guard %d", span.Offset, span.Length, span.GuardOffset), func(t *testing.T) {
			r := dialRawUnix(t, b)
			if resp := r.attach(1, 4096, sealed); resp.ErrorCode != wire.NoError {
				t.Fatalf("attach: %v", resp.ErrorCode)
			}
			r.send(2, shared(span.Offset, span.Length), nil)
			if r.recv(2, &wire.ProduceResponse{}) {
				t.Fatal("a span outside the region was answered")
			}
		})
	}
	t.Run("spans longer than the region", func(t *testing.T) {
		// A well-formed request whose two partitions point to the same batch: each span is
		// inside the region, but together they claim more than it holds. A few bytes of socket
		// traffic must not make the broker allocate and copy more than the client shared.
		c := dial(t, b.Addr().String())
		createTopic(t, c, "shm-twice", 2)
		f, mem := memfd(t, 4096, unix.F_SEAL_SHRINK)
		r := dialRawUnix(t, b)
		if resp := r.attach(1, 4096, f); resp.ErrorCode != wire.NoError {
			t.Fatalf("attach: %v", resp.ErrorCode)
		}
		recs := records(t, strings.Repeat("y", 2500))
		n := int32(copy(mem, recs))
		req := &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
			{Topic: "shm-twice", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: recs}, {Partition: 1, Records: recs}}},
		}}
		enc, cuts, _ := req.AppendSegments(nil, nil)
		twice := &wire.ProduceSharedRequest{Parts: []wire.SharedPart{
			{Inline: enc[:cuts[0]], Length: n, GuardOffset: -1}, {Inline: enc[cuts[0]:cuts[1]], Length: n, GuardOffset: -1}, {Inline: enc[cuts[1]:], GuardOffset: -1},
		}}
		once := &wire.ProduceSharedRequest{Parts: []wire.SharedPart{{Inline: enc[:cuts[0]], Length: n, GuardOffset: -1},
			{Inline: append(enc[cuts[0]:cuts[1]:cuts[1]], recs...), GuardOffset: -1}, {Inline: enc[cuts[1]:], GuardOffset: -1}}}
		var resp wire.ProduceResponse
		r.send(2, once, nil) // the same request with one batch inline: answered
		if !r.recv(2, &resp) || resp.Topics[0].Partitions[1].ErrorCode != wire.NoError {
			t.Fatalf("one span: %+v", resp)
		}
		r.send(3, twice, nil)
		if r.recv(3, &resp) {
			t.Fatal("spans of more than the region were answered")
		}
	})
}

// The broker copies a span before it decodes it: a body that is not a Produce request is a
// malformed request (the connection closes), and a request whose batch the client corrupted is
// refused per partition, as through the socket.
func TestProduceSharedChecksWhatItCopied(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, "unix://"+b.UnixAddr().String())
	createTopic(t, c, "shm-bad", 1)
	file, mem := memfd(t, 64<<10, unix.F_SEAL_SHRINK)

	r := dialRawUnix(t, b)
	if resp := r.attach(1, int64(len(mem)), file); resp.ErrorCode != wire.NoError {
		t.Fatalf("attach: %v", resp.ErrorCode)
	}
	recs := records(t, "good")
	req := &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
		{Topic: "shm-bad", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: recs}}},
	}}
	body := req.AppendTo(nil)
	n := copy(mem[1000:], body)
	r.send(2, shared(1000, int32(n)), nil)
	var resp wire.ProduceResponse
	if !r.recv(2, &resp) || resp.Topics[0].Partitions[0].ErrorCode != wire.NoError {
		t.Fatalf("good produce: %+v", resp)
	}
	// The same body with one record byte flipped: the CRC check sees the copy.
	bad := bytes.Clone(body)
	bad[len(bad)-3] ^= 0xff
	copy(mem[5000:], bad)
	r.send(3, shared(5000, int32(len(bad))), nil)
	if !r.recv(3, &resp) || resp.Topics[0].Partitions[0].ErrorCode != wire.ErrCorruptMessage {
		t.Fatalf("corrupt batch: %+v, want CORRUPT_MESSAGE", resp.Topics[0].Partitions[0])
	}
	// Not a Produce body at all.
	copy(mem[9000:], []byte{0xff, 0xff, 0xff})
	r.send(4, shared(9000, 3), nil)
	if r.recv(4, &resp) {
		t.Fatal("a malformed body was answered")
	}
	awaitCommitted(t, c, "shm-bad", 0, 0)
	if p := fetchP(t, c, "shm-bad", 0, 0, 0, 1); p.HighWatermark != 1 {
		t.Fatalf("high watermark %d, want 1 (only the good batch)", p.HighWatermark)
	}
}

// shared is a ProduceShared request whose body is one span of the region.
func shared(off int64, n int32) *wire.ProduceSharedRequest {
	return &wire.ProduceSharedRequest{Parts: []wire.SharedPart{{Offset: off, Length: n, GuardOffset: -1}}}
}

func strPtrString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// A fault while copying out of a client's mapping is an error, not a crash: the memfd here is
// unsealed and truncated under its mapping, which the broker's checks rule out for a region
// it attaches.
func TestCopyOutSurvivesAFault(t *testing.T) {
	f, mem := memfd(t, 2*os.Getpagesize(), 0)
	r := &sharedRegion{mem: mem}
	parts := []wire.SharedPart{{Offset: 100, Length: 10, GuardOffset: 8}} // the guard is 0
	if err := r.copyParts(parts, make([]byte, 10), nil); err != nil {
		t.Fatalf("copy from a whole mapping: %v", err)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	err := r.copyParts(parts, make([]byte, 10), nil)
	if !errors.Is(err, errSpanRead) {
		t.Fatalf("copy from a truncated mapping: %v, want errSpanRead", err)
	}
}

// A span's guard word must hold its value from before the span is copied until every span of
// the request has been: a request whose guard changed (the client reused the memory after
// giving up on it) is not served, whether the change came before the copy or during it, and
// nothing of it reaches the log.
func TestProduceSharedGuards(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, "unix://"+b.UnixAddr().String())
	createTopic(t, c, "shm-guard", 1)
	file, mem := memfd(t, 64<<10, unix.F_SEAL_SHRINK)
	const guardAt = 512
	guard := (*atomic.Uint64)(unsafe.Pointer(&mem[guardAt]))
	guard.Store(7)
	req := &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
		{Topic: "shm-guard", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, "guarded")}}},
	}}
	n := int32(copy(mem[1024:], req.AppendTo(nil)))
	guarded := func(want uint64) *wire.ProduceSharedRequest {
		return &wire.ProduceSharedRequest{Parts: []wire.SharedPart{{Offset: 1024, Length: n, GuardOffset: guardAt, Guard: want}}}
	}
	attached := func() *rawUnix {
		r := dialRawUnix(t, b)
		if resp := r.attach(1, int64(len(mem)), file); resp.ErrorCode != wire.NoError {
			t.Fatalf("attach: %v", resp.ErrorCode)
		}
		return r
	}

	r := attached()
	r.send(2, guarded(7), nil)
	var resp wire.ProduceResponse
	if !r.recv(2, &resp) || resp.Topics[0].Partitions[0].ErrorCode != wire.NoError {
		t.Fatalf("guard holding its value: %+v", resp)
	}
	r.send(3, guarded(6), nil)
	if r.recv(3, &resp) {
		t.Fatal("a request whose guard had changed before the copy was answered")
	}

	reuse := func() { guard.Add(1) } // the client reuses the memory mid-copy
	b.hooks.Store(&testHooks{sharedCopied: reuse})
	r = attached()
	r.send(2, guarded(7), nil)
	if r.recv(2, &resp) {
		t.Fatal("a request whose guard changed during the copy was answered")
	}
	b.hooks.Store(nil)

	r = attached()
	r.send(2, guarded(8), nil)
	if !r.recv(2, &resp) || resp.Topics[0].Partitions[0].ErrorCode != wire.NoError {
		t.Fatalf("the renewed guard's value: %+v", resp)
	}
	awaitCommitted(t, c, "shm-guard", 0, 1)
	if p := fetchP(t, c, "shm-guard", 0, 0, 0, 1); p.HighWatermark != 2 {
		t.Fatalf("high watermark %d, want 2 (the two requests whose guards held)", p.HighWatermark)
	}
}
