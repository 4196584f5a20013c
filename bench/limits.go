package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LimitsConfig bounds the probes of Limits.
type LimitsConfig struct {
	// Dir is where the disk probes write (the data directory's filesystem); default the
	// system's temporary directory.
	Dir string
	// Duration bounds each probe (default 1 s); MaxBytes too (default 4 GiB for the socket
	// probes, a quarter of it for the disk ones).
	Duration time.Duration
	MaxBytes int64
	// FileSize is the page-cached file the sendfile probes send over and over (default 64 MiB).
	FileSize int64
}

// sendfileSndBuf is the send buffer the broker sets on its sockets for sendfile.
const sendfileSndBuf = 4 << 20

// probeChunk is the size of each write of the stream and disk probes.
const probeChunk = 1 << 20

// LimitsResult is what the machine can do, in GB/s (10^9 bytes per second).
type LimitsResult struct {
	TCPStream     float64 `json:"tcp_stream_gbps"`
	UnixStream    float64 `json:"unix_stream_gbps"`
	SendfileTCP   float64 `json:"sendfile_tcp_gbps"`
	SendfileUnix  float64 `json:"sendfile_unix_gbps"`
	DiskWrite     float64 `json:"disk_write_gbps"`
	Fdatasync1MiB float64 `json:"fdatasync_1mib_gbps"`
	// CRC32CMemory is one core's CRC-32C over data that is in no cache, as the broker's check
	// of a produced batch and a consumer's check of a fetched one mostly find it: next to the
	// copies the socket probes measure, it bounds what one core can do per byte.
	CRC32CMemory float64 `json:"crc32c_memory_gbps"`
	Dir          string  `json:"dir"`
	Seconds      float64 `json:"seconds"`
	RSSPeakMB    float64 `json:"rss_peak_mb"`
	HeapInuseMB  float64 `json:"heap_inuse_mb"`
}

// WriteSummary prints r for people.
func (r LimitsResult) WriteSummary(w io.Writer) {
	for _, p := range probeTitles {
		note := ""
		switch p.name {
		case ProbeDiskWrite:
			note = "  (" + r.Dir + ")"
		case ProbeCRC32C:
			note = "  (one core)"
		}
		fmt.Fprintf(w, "%-25s%6.2f GB/s%s\n", p.title, r.Get(p.name), note)
	}
	fmt.Fprintf(w, "memory: peak RSS %.1f MB, Go heap in use %.1f MB\n", r.RSSPeakMB, r.HeapInuseMB)
}

// Probe names: each is the JSON key of its figure in LimitsResult.
const (
	ProbeTCPStream    = "tcp_stream_gbps"
	ProbeUnixStream   = "unix_stream_gbps"
	ProbeSendfileTCP  = "sendfile_tcp_gbps"
	ProbeSendfileUnix = "sendfile_unix_gbps"
	ProbeDiskWrite    = "disk_write_gbps"
	ProbeFdatasync    = "fdatasync_1mib_gbps"
	ProbeCRC32C       = "crc32c_memory_gbps"
)

// probeTitles name the probes for people, in the order Limits runs them.
var probeTitles = []struct{ name, title string }{
	{ProbeTCPStream, "loopback TCP stream"},
	{ProbeUnixStream, "unix stream"},
	{ProbeSendfileTCP, "sendfile over TCP"},
	{ProbeSendfileUnix, "sendfile over unix"},
	{ProbeDiskWrite, "sequential write"},
	{ProbeFdatasync, "write + fdatasync 1 MiB"},
	{ProbeCRC32C, "CRC-32C from memory"},
}

// ProbeTitle is how summaries name a probe ("sequential write"); the name itself if unknown.
func ProbeTitle(name string) string {
	for _, p := range probeTitles {
		if p.name == name {
			return p.title
		}
	}
	return name
}

// figure returns the field of r that holds probe name's result, nil if there is none.
func (r *LimitsResult) figure(name string) *float64 {
	switch name {
	case ProbeTCPStream:
		return &r.TCPStream
	case ProbeUnixStream:
		return &r.UnixStream
	case ProbeSendfileTCP:
		return &r.SendfileTCP
	case ProbeSendfileUnix:
		return &r.SendfileUnix
	case ProbeDiskWrite:
		return &r.DiskWrite
	case ProbeFdatasync:
		return &r.Fdatasync1MiB
	case ProbeCRC32C:
		return &r.CRC32CMemory
	}
	return nil
}

// Get returns probe name's figure in GB/s (0 if it did not run or is unknown).
func (r LimitsResult) Get(name string) float64 {
	if f := r.figure(name); f != nil {
		return *f
	}
	return 0
}

// Limits runs every probe, one after another, in this process.
func Limits(ctx context.Context, c LimitsConfig) (LimitsResult, error) {
	names := make([]string, len(probeTitles))
	for i, p := range probeTitles {
		names[i] = p.name
	}
	return LimitsOf(ctx, c, names...)
}

// LimitsOf runs the probes named (Probe constants), one after another in the order Limits
// runs them, each once; the figures of the others stay zero.
func LimitsOf(ctx context.Context, c LimitsConfig, names ...string) (LimitsResult, error) {
	if c.Duration <= 0 {
		c.Duration = time.Second
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 4 << 30
	}
	if c.FileSize <= 0 {
		c.FileSize = 64 << 20
	}
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	start := time.Now()
	r := LimitsResult{Dir: c.Dir}
	for _, n := range names {
		if r.figure(n) == nil {
			return r, fmt.Errorf("bench: limits: no probe %q", n)
		}
	}
	tmp, err := os.MkdirTemp(c.Dir, "sluice-limits-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(tmp)
	sock := filepath.Join(tmp, "s.sock")
	run := map[string]func() (int64, time.Duration, error){
		ProbeTCPStream:    func() (int64, time.Duration, error) { return streamProbe(ctx, "tcp", "127.0.0.1:0", c, nil) },
		ProbeUnixStream:   func() (int64, time.Duration, error) { return streamProbe(ctx, "unix", sock, c, nil) },
		ProbeSendfileTCP:  func() (int64, time.Duration, error) { return sendfileProbe(ctx, "tcp", "127.0.0.1:0", tmp, c) },
		ProbeSendfileUnix: func() (int64, time.Duration, error) { return sendfileProbe(ctx, "unix", sock, tmp, c) },
		ProbeDiskWrite:    func() (int64, time.Duration, error) { return diskProbe(ctx, tmp, c, false) },
		ProbeFdatasync:    func() (int64, time.Duration, error) { return diskProbe(ctx, tmp, c, true) },
		ProbeCRC32C:       func() (int64, time.Duration, error) { return crcProbe(ctx, c) },
	}
	for _, p := range probeTitles {
		if !slices.Contains(names, p.name) {
			continue
		}
		n, d, err := run[p.name]()
		if err != nil {
			return r, fmt.Errorf("bench: limits: %s: %w", p.title, err)
		}
		if d > 0 {
			*r.figure(p.name) = float64(n) / d.Seconds() / 1e9
		}
		os.Remove(sock)
	}
	r.Seconds = time.Since(start).Seconds()
	r.RSSPeakMB, r.HeapInuseMB = MemoryMB()
	return r, nil
}

// streamProbe measures a socket pair on network/addr: send, given the sending side, writes
// until the budget is spent (nil: 1 MiB writes from a buffer); the other side reads and
// counts. It returns the bytes received and the time taken.
func streamProbe(ctx context.Context, network, addr string, c LimitsConfig, send func(net.Conn) error) (int64, time.Duration, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return 0, 0, err
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		acc <- accepted{c, err}
	}()
	w, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		return 0, 0, err
	}
	a := <-acc
	if a.err != nil {
		w.Close()
		return 0, 0, a.err
	}
	r := a.c
	defer r.Close()
	if send == nil {
		send = func(conn net.Conn) error {
			buf := make([]byte, probeChunk)
			deadline := time.Now().Add(c.Duration)
			for sent := int64(0); sent < c.MaxBytes && time.Now().Before(deadline) && ctx.Err() == nil; {
				n, err := conn.Write(buf)
				sent += int64(n)
				if err != nil {
					return err
				}
			}
			return nil
		}
	}
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		err := send(w)
		w.Close() // the reader sees EOF
		werr <- err
	}()
	buf := make([]byte, probeChunk)
	var got int64
	for {
		n, err := r.Read(buf)
		got += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return got, 0, err
		}
	}
	d := time.Since(start)
	return got, d, <-werr
}

// sendfileProbe sends a page-cached file over a socket with sendfile(2) at explicit offsets,
// from a socket with the broker's 4 MiB send buffer.
func sendfileProbe(ctx context.Context, network, addr, dir string, c LimitsConfig) (int64, time.Duration, error) {
	size := min(c.FileSize, c.MaxBytes)
	f, err := os.CreateTemp(dir, "sendfile-")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	buf := make([]byte, probeChunk)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	for written := int64(0); written < size; {
		n, err := f.Write(buf[:min(int64(len(buf)), size-written)])
		written += int64(n)
		if err != nil {
			return 0, 0, err
		}
	}
	// The file was just written, so its pages are in the cache; read it once to be sure.
	if _, err := io.Copy(io.Discard, io.NewSectionReader(f, 0, size)); err != nil {
		return 0, 0, err
	}
	ffd := int(f.Fd())
	return streamProbe(ctx, network, addr, c, func(conn net.Conn) error {
		sc, ok := conn.(syscall.Conn)
		if !ok {
			return errors.New("connection has no file descriptor")
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, sendfileSndBuf)
		}); err != nil || serr != nil {
			return errors.Join(err, serr)
		}
		deadline := time.Now().Add(c.Duration)
		var sent, off int64
		werr := raw.Write(func(fd uintptr) bool {
			for sent < c.MaxBytes && ctx.Err() == nil {
				if !time.Now().Before(deadline) {
					return true
				}
				if off >= size {
					off = 0
				}
				n, err := unix.Sendfile(int(fd), ffd, &off, int(min(4<<20, size-off)))
				if n > 0 {
					sent += int64(n)
				}
				switch {
				case err == unix.EAGAIN:
					return false // wait until the socket is writable
				case err == unix.EINTR:
				case err != nil:
					serr = err
					return true
				case n == 0:
					serr = io.ErrUnexpectedEOF
					return true
				}
			}
			return true
		})
		return errors.Join(werr, serr)
	})
}

// crcProbeBytes is the crc probe's buffer: larger than the last-level caches of the machines
// this runs on (tens of MiB), so that each pass reads from memory, as the broker's check of a
// request just copied from the socket by another core, or a consumer's of a fetch, mostly does.
const crcProbeBytes = 64 << 20

// crcProbe checksums 1 MiB chunks of a buffer larger than the caches, round and round, for
// c.Duration or c.MaxBytes.
func crcProbe(ctx context.Context, c LimitsConfig) (int64, time.Duration, error) {
	buf := make([]byte, min(crcProbeBytes, max(c.MaxBytes, probeChunk)))
	for i := range buf {
		buf[i] = byte(i * 131)
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	var n int64
	var sum uint32
	start := time.Now()
	for off := 0; n < c.MaxBytes && time.Since(start) < c.Duration; off = (off + probeChunk) % len(buf) {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		end := min(off+probeChunk, len(buf))
		sum ^= crc32.Update(sum, table, buf[off:end])
		n += int64(end - off)
	}
	d := time.Since(start)
	crcSink = sum
	return n, d, nil
}

// crcSink keeps the probe's checksums from being optimised away.
var crcSink uint32

// diskProbe writes 1 MiB chunks to a new file in dir (fdatasync after each with sync) for
// c.Duration or a quarter of c.MaxBytes.
func diskProbe(ctx context.Context, dir string, c LimitsConfig, sync bool) (int64, time.Duration, error) {
	f, err := os.CreateTemp(dir, "disk-")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, probeChunk)
	for i := range buf {
		buf[i] = byte(i * 17)
	}
	limit := max(c.MaxBytes/4, probeChunk)
	start := time.Now()
	deadline := start.Add(c.Duration)
	var written int64
	for written < limit && time.Now().Before(deadline) && ctx.Err() == nil {
		n, err := f.Write(buf)
		written += int64(n)
		if err != nil {
			return written, 0, err
		}
		if sync {
			if err := fdatasync(f); err != nil {
				return written, 0, err
			}
		}
	}
	return written, time.Since(start), nil
}
