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
	fmt.Fprintf(w, "loopback TCP stream      %6.2f GB/s\n", r.TCPStream)
	fmt.Fprintf(w, "unix stream              %6.2f GB/s\n", r.UnixStream)
	fmt.Fprintf(w, "sendfile over TCP        %6.2f GB/s\n", r.SendfileTCP)
	fmt.Fprintf(w, "sendfile over unix       %6.2f GB/s\n", r.SendfileUnix)
	fmt.Fprintf(w, "sequential write         %6.2f GB/s  (%s)\n", r.DiskWrite, r.Dir)
	fmt.Fprintf(w, "write + fdatasync 1 MiB  %6.2f GB/s\n", r.Fdatasync1MiB)
	fmt.Fprintf(w, "CRC-32C from memory      %6.2f GB/s  (one core)\n", r.CRC32CMemory)
	fmt.Fprintf(w, "memory: peak RSS %.1f MB, Go heap in use %.1f MB\n", r.RSSPeakMB, r.HeapInuseMB)
}

// Limits runs every probe, one after another, in this process.
func Limits(ctx context.Context, c LimitsConfig) (LimitsResult, error) {
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
	tmp, err := os.MkdirTemp(c.Dir, "sluice-limits-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(tmp)
	sock := filepath.Join(tmp, "s.sock")
	probes := []struct {
		name string
		out  *float64
		run  func() (int64, time.Duration, error)
	}{
		{"tcp stream", &r.TCPStream, func() (int64, time.Duration, error) { return streamProbe(ctx, "tcp", "127.0.0.1:0", c, nil) }},
		{"unix stream", &r.UnixStream, func() (int64, time.Duration, error) { return streamProbe(ctx, "unix", sock, c, nil) }},
		{"sendfile tcp", &r.SendfileTCP, func() (int64, time.Duration, error) { return sendfileProbe(ctx, "tcp", "127.0.0.1:0", tmp, c) }},
		{"sendfile unix", &r.SendfileUnix, func() (int64, time.Duration, error) { return sendfileProbe(ctx, "unix", sock, tmp, c) }},
		{"disk write", &r.DiskWrite, func() (int64, time.Duration, error) { return diskProbe(ctx, tmp, c, false) }},
		{"fdatasync", &r.Fdatasync1MiB, func() (int64, time.Duration, error) { return diskProbe(ctx, tmp, c, true) }},
		{"crc32c", &r.CRC32CMemory, func() (int64, time.Duration, error) { return crcProbe(ctx, c) }},
	}
	for _, p := range probes {
		n, d, err := p.run()
		if err != nil {
			return r, fmt.Errorf("bench: limits: %s: %w", p.name, err)
		}
		if d > 0 {
			*p.out = float64(n) / d.Seconds() / 1e9
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
