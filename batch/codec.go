package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a batch's compression codec, as stored in attribute bits 0-2.
type Codec int8

// Codecs, numbered as in Kafka's attributes field.
const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4

	numCodecs = 5
)

var codecNames = [numCodecs]string{"none", "gzip", "snappy", "lz4", "zstd"}

func (c Codec) valid() bool { return c >= 0 && c < numCodecs }

// String returns the codec's Kafka name (compression.type).
func (c Codec) String() string {
	if c.valid() {
		return codecNames[c]
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// ParseCodec parses a Kafka compression.type name: none, gzip, snappy, lz4
// or zstd (case-insensitive).
func ParseCodec(s string) (Codec, error) {
	for i, name := range codecNames {
		if strings.EqualFold(s, name) {
			return Codec(i), nil
		}
	}
	return None, fmt.Errorf("%w: %q", ErrUnknownCodec, s)
}

// DefaultMaxDecompressed is the decompression cap used when IterOptions
// leaves MaxDecompressed at zero. Kafka's default max.message.bytes is about
// 1 MiB compressed; 64 MiB leaves room for highly compressible log lines
// while keeping a hostile batch from taking the heap.
const DefaultMaxDecompressed = 64 << 20

// Kafka/xerial snappy framing, as written by snappy-java's
// SnappyOutputStream (which Kafka's Java producer uses).
var xerialMagic = [8]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16 // magic, version int32, compatible version int32
	xerialVersion    = 1
	xerialCompatible = 1
	// xerialChunk is snappy-java's default block size; chunks of this much
	// input keep Java readers' per-chunk buffers at their usual size.
	xerialChunk = 32 << 10
)

const (
	// maxZstdWindow is the largest window any frame may declare: libzstd's
	// own default limit (windowLog 27), enough for every compression level
	// a Kafka producer can configure.
	maxZstdWindow = 1 << 27
	// minZstdWindow is the window a frame may always declare, whatever the
	// caller's cap: the zstd spec asks decoders to support 8 MiB, and Java
	// producers declare 2-8 MiB even for tiny batches.
	minZstdWindow = 8 << 20
)

// Compression levels. CompressionLevel 0 (or negative) selects the codec's
// default; larger values are clamped to the codec's range.
const (
	maxGzipLevel = 9 // 0 is gzip's default (6)
	maxLZ4Level  = 9 // 0 is lz4's fast mode; 1-9 are pierrec's HC levels
	numLevels    = 10
)

var lz4Levels = [numLevels]lz4.CompressionLevel{
	lz4.Fast, lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4,
	lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9,
}

// levelIndex maps a user level to a small index so encoders can be pooled
// per (codec, level) in a fixed array, without map lookups or allocation.
func levelIndex(c Codec, level int) int {
	if level <= 0 {
		return 0
	}
	switch c {
	case Gzip:
		return min(level, maxGzipLevel)
	case LZ4:
		return min(level, maxLZ4Level)
	case Zstd:
		// Kafka's zstd levels (1-22) map onto klauspost's four speeds.
		return int(zstd.EncoderLevelFromZstd(level))
	}
	return 0
}

// encoder is the reusable compression state for one (codec, level).
type encoder struct {
	w    appendWriter
	gz   *gzip.Writer
	lz   *lz4.Compressor
	lzhc *lz4.CompressorHC
	zstd *zstd.Encoder
}

// encoders pools encoders per codec and level: a client has one Builder per
// partition but compresses in only a few at once, so pooling keeps one
// zstd encoder (megabytes of tables) per concurrent Build, not per partition.
var encoders [numCodecs][numLevels]sync.Pool

func getEncoder(c Codec, li int) (*encoder, error) {
	if e, ok := encoders[c][li].Get().(*encoder); ok {
		return e, nil
	}
	e := new(encoder)
	switch c {
	case Gzip:
		level := gzip.DefaultCompression
		if li > 0 {
			level = li
		}
		gz, err := gzip.NewWriterLevel(&e.w, level)
		if err != nil {
			return nil, err
		}
		e.gz = gz
	case LZ4:
		if li == 0 {
			e.lz = new(lz4.Compressor)
		} else {
			e.lzhc = &lz4.CompressorHC{Level: lz4Levels[li]}
		}
	case Zstd:
		level := zstd.SpeedDefault
		if li > 0 {
			level = zstd.EncoderLevel(li)
		}
		// Concurrency 1 and EncodeAll only: no goroutines inside.
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		e.zstd = enc
	}
	return e, nil
}

// compress appends src, compressed with codec c at level, to dst.
func compress(dst []byte, c Codec, level int, src []byte) ([]byte, error) {
	switch c {
	case None:
		return append(dst, src...), nil
	case Snappy:
		return appendXerial(dst, src), nil
	}
	if !c.valid() {
		return dst, fmt.Errorf("%w: %d", ErrUnknownCodec, int8(c))
	}
	li := levelIndex(c, level)
	e, err := getEncoder(c, li)
	if err != nil {
		return dst, fmt.Errorf("batch: %s encoder: %w", c, err)
	}
	defer encoders[c][li].Put(e)
	switch c {
	case Zstd:
		return e.zstd.EncodeAll(src, dst), nil
	case Gzip:
		e.w.b = dst
		e.gz.Reset(&e.w)
		_, err = e.gz.Write(src)
		if err == nil {
			err = e.gz.Close()
		}
	case LZ4:
		dst, err = e.appendLZ4(dst, src)
		if err != nil {
			return dst, fmt.Errorf("batch: lz4 compress: %w", err)
		}
		return dst, nil
	}
	dst, e.w.b = e.w.b, nil // the pooled encoder must not keep the caller's buffer
	if err != nil {
		return dst, fmt.Errorf("batch: %s compress: %w", c, err)
	}
	return dst, nil
}

// appendXerial appends src in xerial snappy framing to dst.
func appendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialMagic[:]...)
	dst = binary.BigEndian.AppendUint32(dst, xerialVersion)
	dst = binary.BigEndian.AppendUint32(dst, xerialCompatible)
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialChunk)]
		src = src[len(chunk):]
		start := len(dst)
		need := 4 + snappy.MaxEncodedLen(len(chunk))
		dst = grow(dst, need)
		enc := snappy.Encode(dst[start+4:start+need], chunk)
		binary.BigEndian.PutUint32(dst[start:], uint32(len(enc)))
		dst = dst[:start+4+len(enc)]
	}
	return dst
}

// grow returns dst extended by n bytes, reallocating geometrically.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		nb := make([]byte, len(dst), max(2*cap(dst), len(dst)+n))
		copy(nb, dst)
		dst = nb
	}
	return dst[:len(dst)+n]
}

// appendWriter is an io.Writer appending to b; it lets stream encoders
// write straight into the caller's buffer.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// Decompressor holds reusable decoder state and an output buffer, so that a
// consumer decoding batch after batch allocates nothing in steady state. The
// zero value is ready to use. A Decompressor is not safe for concurrent use.
type Decompressor struct {
	buf  []byte
	src  bytes.Reader
	gz   *gzip.Reader
	zstd *zstd.Decoder
	// zstdWindow is the decoder's current max window; see unzstd.
	zstdWindow uint64
	probe      [1]byte
	// scratch tells an LZ4 block too big for the cap from a corrupt one.
	scratch []byte
}

// decompressors serves iterators not given a Decompressor: they borrow the
// decoder state but keep (and so must not share) the output buffer.
var decompressors = sync.Pool{New: func() any { return new(Decompressor) }}

// Decompress decompresses src, a records blob compressed with c, refusing
// to produce more than limit bytes (ErrTooLarge) and never allocating past
// limit. The result aliases the Decompressor's buffer: it is valid until the
// next call.
func (d *Decompressor) Decompress(c Codec, src []byte, limit int) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxDecompressed
	}
	var out []byte
	var err error
	switch c {
	case None:
		if len(src) > limit {
			return nil, fmt.Errorf("%w: %d bytes, cap %d", ErrTooLarge, len(src), limit)
		}
		return src, nil
	case Gzip:
		out, err = d.gunzip(src, limit)
	case Snappy:
		out, err = d.unsnappy(src, limit)
	case LZ4:
		out, err = d.unlz4(src, limit)
	case Zstd:
		out, err = d.unzstd(src, limit)
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnknownCodec, int8(c))
	}
	if out != nil {
		d.buf = out[:0]
	}
	d.src.Reset(nil) // do not pin the batch while idle
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, fmt.Errorf("%s: %w", c, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrCorruptRecord, c, err)
	}
	return out, nil
}

func (d *Decompressor) gunzip(src []byte, limit int) ([]byte, error) {
	d.src.Reset(src)
	if d.gz == nil {
		d.gz = new(gzip.Reader)
	}
	if err := d.gz.Reset(&d.src); err != nil {
		return nil, err
	}
	return d.readAll(d.gz, len(src), limit)
}

func (d *Decompressor) unzstd(src []byte, limit int) ([]byte, error) {
	// A streamed frame costs a ring buffer of its declared window, whatever
	// it holds, so the window is bounded by the cap too (but never below
	// what the spec asks decoders to support). The bound changes only when
	// the caller's cap does, so the reconfiguration is rare.
	window := uint64(min(max(limit, minZstdWindow), maxZstdWindow))
	if d.zstd == nil {
		zd, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1), // synchronous: no goroutines
			zstd.WithDecoderMaxWindow(window),
			zstd.WithDecodeAllCapLimit(true), // DecodeAll stops at cap(dst)
		)
		if err != nil {
			return nil, err
		}
		d.zstd, d.zstdWindow = zd, window
	} else if d.zstdWindow != window {
		if err := d.zstd.ResetWithOptions(nil, zstd.WithDecoderMaxWindow(window)); err != nil {
			return nil, err
		}
		d.zstdWindow = window
	}
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return nil, err
	}
	if !h.Skippable && h.HasFCS {
		// The frame says how big it is (Go producers, EncodeAll): decode in
		// one shot into a buffer of exactly that size.
		if h.FrameContentSize > uint64(limit) {
			return nil, fmt.Errorf("%w: zstd frame of %d bytes, cap %d", ErrTooLarge, h.FrameContentSize, limit)
		}
		dst := d.buf[:0]
		if cap(dst) < int(h.FrameContentSize) {
			dst = make([]byte, 0, h.FrameContentSize)
		}
		out, err := d.zstd.DecodeAll(src, dst[:0:min(cap(dst), limit)])
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, zstdErr(err, limit)
		}
		// More frames follow than fit the buffer: stream them, bounded.
	}
	d.src.Reset(src)
	if err := d.zstd.Reset(&d.src); err != nil {
		return nil, zstdErr(err, limit)
	}
	out, err := d.readAll(d.zstd, len(src), limit)
	_ = d.zstd.Reset(nil) // do not pin the batch
	return out, zstdErr(err, limit)
}

// zstdErr reports a frame refused for its window as over the cap, which is
// why the window was refused.
func zstdErr(err error, limit int) error {
	if errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return fmt.Errorf("%w: zstd window exceeds the %d-byte cap: %w", ErrTooLarge, limit, err)
	}
	return err
}

// unsnappy decodes xerial-framed snappy (Kafka's Java producer) or a raw
// snappy block (some other clients).
func (d *Decompressor) unsnappy(src []byte, limit int) ([]byte, error) {
	if len(src) < xerialHeaderSize || !bytes.Equal(src[:len(xerialMagic)], xerialMagic[:]) {
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return nil, err
		}
		if n > limit {
			return nil, fmt.Errorf("%w: snappy block of %d bytes, cap %d", ErrTooLarge, n, limit)
		}
		dst := d.buf[:0]
		if cap(dst) < n {
			dst = make([]byte, 0, n)
		}
		return snappy.Decode(dst[:n], src)
	}
	// The version fields are not checked: snappy-java itself only rejects
	// a compatible version below 1, and chunks have meant the same since.
	dst := d.buf[:0]
	for p := src[xerialHeaderSize:]; len(p) > 0; {
		if len(p) < 4 {
			return dst, errors.New("xerial snappy: truncated chunk length")
		}
		clen := binary.BigEndian.Uint32(p)
		p = p[4:]
		if uint64(clen) > uint64(len(p)) {
			return dst, fmt.Errorf("xerial snappy: chunk of %d bytes, %d left", clen, len(p))
		}
		chunk := p[:clen]
		p = p[clen:]
		n, err := snappy.DecodedLen(chunk)
		if err != nil {
			return dst, err
		}
		if n > limit-len(dst) {
			return dst, fmt.Errorf("%w: snappy chunks pass cap %d", ErrTooLarge, limit)
		}
		start := len(dst)
		dst = growCapped(dst, n, limit)
		if _, err := snappy.Decode(dst[start:], chunk); err != nil {
			return dst[:start], err
		}
	}
	return dst, nil
}

// readAll reads r to EOF into the reusable buffer, growing it geometrically
// but never past limit; one byte beyond limit means ErrTooLarge.
func (d *Decompressor) readAll(r io.Reader, srcLen, limit int) ([]byte, error) {
	dst := d.buf[:0]
	if cap(dst) == 0 {
		// Log lines compress 4-10x; start near that and let growth correct.
		dst = make([]byte, 0, min(limit, max(4*srcLen, 4<<10)))
	}
	for stalls := 0; ; {
		end := min(cap(dst), limit)
		if len(dst) == end {
			if end == limit {
				n, err := io.ReadFull(r, d.probe[:])
				if n > 0 {
					return dst, fmt.Errorf("%w: decompressed past cap %d", ErrTooLarge, limit)
				}
				if err == io.EOF {
					return dst, nil
				}
				return dst, err
			}
			nb := make([]byte, len(dst), min(limit, 2*cap(dst)))
			copy(nb, dst)
			dst = nb
			continue
		}
		n, err := r.Read(dst[len(dst):end])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
		// A decoder that keeps returning nothing would spin forever on
		// hostile input; bufio.Reader gives up the same way.
		if stalls++; n > 0 {
			stalls = 0
		} else if stalls > 100 {
			return dst, io.ErrNoProgress
		}
	}
}
