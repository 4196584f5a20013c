package batch

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// logLines returns n bytes of deterministic JSON log lines, the shape of
// payload a broker mostly carries.
func logLines(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	levels := []string{"info", "info", "info", "warn", "error", "debug"}
	services := []string{"checkout", "payments", "search", "inventory", "auth"}
	msgs := []string{"request served", "cache miss", "retrying upstream call", "order placed",
		"user session refreshed", "slow query detected", "payment authorised"}
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"ts":"2026-11-29T18:%02d:%02d.%03dZ","level":"%s","service":"%s","trace_id":"%016x","msg":"%s","latency_ms":%d}`+"\n",
			i/60%60, i%60, rng.IntN(1000), levels[rng.IntN(len(levels))], services[rng.IntN(len(services))],
			rng.Uint64(), msgs[rng.IntN(len(msgs))], rng.IntN(500))
	}
	return b.Bytes()[:n]
}

func mustCompress(t testing.TB, c Codec, level int, src []byte) []byte {
	t.Helper()
	out, err := compress(nil, c, level, src)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCodecRoundTripSizes(t *testing.T) {
	for _, c := range allCodecs {
		for _, n := range []int{1, 100, xerialChunk - 1, xerialChunk, xerialChunk + 1, lz4WriteBlock + 1, 1 << 20} {
			for _, src := range [][]byte{logLines(n), randomBytes(n)} {
				comp := mustCompress(t, c, 0, src)
				var d Decompressor
				got, err := d.Decompress(c, comp, len(src))
				if err != nil {
					t.Fatalf("%s %d bytes: %v", c, n, err)
				}
				if !bytes.Equal(got, src) {
					t.Fatalf("%s %d bytes: round trip mismatch", c, n)
				}
			}
		}
	}
}

func randomBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func TestSnappyKnownInputs(t *testing.T) {
	// A raw snappy block written by hand: uvarint length 5, then a literal
	// element of 5 bytes (tag (5-1)<<2).
	raw := []byte{0x05, 0x10, 'h', 'e', 'l', 'l', 'o'}
	// The same block in xerial framing, as snappy-java writes it.
	xerial := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 7}
	xerial = append(xerial, raw...)
	// Two chunks, to show chunks concatenate.
	twoChunks := append(bytes.Clone(xerial), 0, 0, 0, 7)
	twoChunks = append(twoChunks, raw...)

	for _, tt := range []struct {
		name string
		in   []byte
		want string
	}{
		{"raw", raw, "hello"},
		{"xerial", xerial, "hello"},
		{"xerial two chunks", twoChunks, "hellohello"},
		{"xerial no chunks", xerial[:16], ""},
	} {
		var d Decompressor
		got, err := d.Decompress(Snappy, tt.in, 1<<10)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

func TestSnappyXerialLayout(t *testing.T) {
	src := logLines(3*xerialChunk + 100)
	out := appendXerial(nil, src)
	if !bytes.Equal(out[:16], []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}) {
		t.Fatalf("xerial header %x", out[:16])
	}
	var got []byte
	var chunks int
	for p := out[16:]; len(p) > 0; chunks++ {
		n := binary.BigEndian.Uint32(p)
		block := p[4 : 4+n]
		p = p[4+n:]
		dec, err := snappy.Decode(nil, block)
		if err != nil {
			t.Fatal(err)
		}
		if len(dec) > xerialChunk {
			t.Fatalf("chunk %d holds %d bytes", chunks, len(dec))
		}
		got = append(got, dec...)
	}
	if chunks != 4 || !bytes.Equal(got, src) {
		t.Fatalf("%d chunks, equal %v", chunks, bytes.Equal(got, src))
	}
	// Raw snappy from another client decodes too.
	var d Decompressor
	if dec, err := d.Decompress(Snappy, snappy.Encode(nil, src), len(src)); err != nil || !bytes.Equal(dec, src) {
		t.Fatalf("raw snappy: %v", err)
	}
}

func TestLZ4FrameMatchesKafkaLayout(t *testing.T) {
	src := logLines(200 << 10)
	ours := mustCompress(t, LZ4, 0, src)

	// pierrec's own Writer, configured as Kafka's producer, writes the same
	// descriptor (which checks our constant header checksum byte).
	var ref bytes.Buffer
	w := lz4.NewWriter(&ref)
	if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours[:7], ref.Bytes()[:7]) {
		t.Fatalf("descriptor %x, pierrec writes %x", ours[:7], ref.Bytes()[:7])
	}
	if ours[4] != 0x60 || ours[5] != 0x40 {
		t.Fatalf("FLG %#x BD %#x, want independent 64 KiB blocks", ours[4], ours[5])
	}
	// Walk the blocks: none may exceed 64 KiB of input.
	p := ours[7:]
	for {
		word := binary.LittleEndian.Uint32(p)
		p = p[4:]
		if word == 0 {
			break
		}
		size := word &^ lz4Uncompressed
		if size > lz4WriteBlock {
			t.Fatalf("block of %d bytes", size)
		}
		p = p[size:]
	}
	if len(p) != 0 {
		t.Fatalf("%d bytes after end mark", len(p))
	}

	// A reference reader accepts ours.
	dec, err := io.ReadAll(lz4.NewReader(bytes.NewReader(ours)))
	if err != nil || !bytes.Equal(dec, src) {
		t.Fatalf("pierrec reader on our frame: %v", err)
	}
}

func TestLZ4ReadsOtherWriters(t *testing.T) {
	src := logLines(300 << 10)
	opts := map[string][]lz4.Option{
		"4MiB blocks, content checksum": {lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(true)},
		"256KiB, block checksums":       {lz4.BlockSizeOption(lz4.Block256Kb), lz4.BlockChecksumOption(true)},
		"content size":                  {lz4.SizeOption(uint64(len(src)))},
		"HC":                            {lz4.CompressionLevelOption(lz4.Level5)},
	}
	for name, o := range opts {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(o...); err != nil {
			t.Fatal(err)
		}
		w.Write(src)
		w.Close()
		var d Decompressor
		got, err := d.Decompress(LZ4, buf.Bytes(), len(src))
		if err != nil || !bytes.Equal(got, src) {
			t.Errorf("%s: %v", name, err)
		}
		// Two concatenated frames are one stream.
		two := append(bytes.Clone(buf.Bytes()), buf.Bytes()...)
		got, err = d.Decompress(LZ4, two, 2*len(src))
		if err != nil || !bytes.Equal(got, append(bytes.Clone(src), src...)) {
			t.Errorf("%s, two frames: %v", name, err)
		}
	}
}

func TestGzipIsStandard(t *testing.T) {
	src := logLines(100 << 10)
	ours := mustCompress(t, Gzip, 0, src)
	r, err := stdgzip.NewReader(bytes.NewReader(ours))
	if err != nil {
		t.Fatal(err)
	}
	if dec, err := io.ReadAll(r); err != nil || !bytes.Equal(dec, src) {
		t.Fatalf("stdlib gunzip: %v", err)
	}
	var std bytes.Buffer
	w := stdgzip.NewWriter(&std)
	w.Write(src)
	w.Close()
	var d Decompressor
	if dec, err := d.Decompress(Gzip, std.Bytes(), len(src)); err != nil || !bytes.Equal(dec, src) {
		t.Fatalf("stdlib gzip through Decompress: %v", err)
	}
}

func TestZstdFramesWithAndWithoutContentSize(t *testing.T) {
	src := logLines(500 << 10)
	withFCS := mustCompress(t, Zstd, 0, src)
	if binary.LittleEndian.Uint32(withFCS) != 0xFD2FB528 {
		t.Fatalf("zstd magic %x", withFCS[:4])
	}
	// A streaming encoder, as Java's zstd-jni, does not declare the size.
	var stream bytes.Buffer
	w, err := zstd.NewWriter(&stream, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(src)
	w.Close()
	var h zstd.Header
	if err := h.Decode(stream.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("stream frame header: %+v %v", h, err)
	}
	two := append(bytes.Clone(withFCS), withFCS...)
	for name, in := range map[string][]byte{"fcs": withFCS, "stream": stream.Bytes(), "two frames": two} {
		want := src
		if name == "two frames" {
			want = append(bytes.Clone(src), src...)
		}
		var d Decompressor
		got, err := d.Decompress(Zstd, in, len(want))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := d.Decompress(Zstd, in, len(want)-1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s, cap one short: %v", name, err)
		}
		// A larger cap reconfigures the decoder's window bound; it must
		// keep working, and go back.
		if got, err := d.Decompress(Zstd, in, 100<<20); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s, 100 MiB cap: %v", name, err)
		}
		if got, err := d.Decompress(Zstd, in, len(want)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s, back to exact cap: %v", name, err)
		}
	}
}

// TestDecompressCap checks every codec stops at the cap with ErrTooLarge and
// allocates in proportion to the cap, not to what the input would expand to.
func TestDecompressCap(t *testing.T) {
	bomb := make([]byte, 64<<20) // zeros: every codec shrinks this enormously
	const limit = 256 << 10
	for _, c := range allCodecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			comp := mustCompress(t, c, 0, bomb)
			var d Decompressor
			if _, err := d.Decompress(c, comp, limit); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
			d = Decompressor{}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := d.Decompress(c, comp, limit)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v", err)
			}
			// Decoder state (zstd tables, an lz4 scratch block) plus at most
			// twice the cap for the output.
			const bound = 2*limit + 4<<20
			if got := after.TotalAlloc - before.TotalAlloc; got > bound {
				t.Fatalf("allocated %d bytes for a %d-byte cap", got, limit)
			}
		})
	}
	t.Run("zstd stream", func(t *testing.T) {
		// No content size in the frame: the cap must stop the streaming
		// decoder, whose ring is the declared window (8 MiB here).
		var stream bytes.Buffer
		w, err := zstd.NewWriter(&stream, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(bomb)
		w.Close()
		var h zstd.Header
		if err := h.Decode(stream.Bytes()); err != nil || h.HasFCS {
			t.Fatalf("header %+v, %v", h, err)
		}
		var d Decompressor
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = d.Decompress(Zstd, stream.Bytes(), limit)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err = %v", err)
		}
		bound := 2*limit + h.WindowSize + 4<<20
		if got := after.TotalAlloc - before.TotalAlloc; got > bound {
			t.Fatalf("allocated %d bytes for a %d-byte cap, window %d", got, limit, h.WindowSize)
		}
		// A window larger than both the cap and 8 MiB is refused up front.
		big := bytes.Clone(stream.Bytes())
		var hb zstd.Header
		big[4] = 0         // frame header descriptor: no FCS, not single segment
		big[5] = 0x10 << 3 // window descriptor: exponent 16 -> 2^26 = 64 MiB
		if err := hb.Decode(big); err != nil || hb.WindowSize != 64<<20 {
			t.Fatalf("crafted header %+v %v", hb, err)
		}
		if _, err := d.Decompress(Zstd, big, limit); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("64 MiB window: %v", err)
		}
	})
	t.Run("exact cap", func(t *testing.T) {
		src := logLines(100 << 10)
		for _, c := range allCodecs {
			comp := mustCompress(t, c, 0, src)
			var d Decompressor
			if got, err := d.Decompress(c, comp, len(src)); err != nil || !bytes.Equal(got, src) {
				t.Errorf("%s at exact cap: %v", c, err)
			}
			if _, err := d.Decompress(c, comp, len(src)-1); !errors.Is(err, ErrTooLarge) {
				t.Errorf("%s one under cap: %v", c, err)
			}
		}
	})
}

func TestDecompressCorrupt(t *testing.T) {
	src := logLines(80 << 10)
	for _, c := range allCodecs[1:] {
		comp := mustCompress(t, c, 0, src)
		var d Decompressor
		// Every truncation is an error (or, for a cut on a boundary, a
		// shorter output), never a panic.
		for n := 0; n < len(comp); n += 1 + n/16 {
			if out, err := d.Decompress(c, comp[:n], 1<<20); err == nil && len(out) >= len(src) {
				t.Errorf("%s: %d-byte truncation decoded fully", c, n)
			} else if err != nil && !errors.Is(err, ErrCorruptRecord) && !errors.Is(err, ErrTooLarge) {
				t.Errorf("%s: truncation to %d: unwrapped error %v", c, n, err)
			}
		}
		// Flipped bytes in the body: must not panic; error kinds as above.
		for i := 0; i < len(comp); i += 1 + len(comp)/200 {
			bad := bytes.Clone(comp)
			bad[i] ^= 0x5a
			if _, err := d.Decompress(c, bad, 1<<20); err != nil && !errors.Is(err, ErrCorruptRecord) && !errors.Is(err, ErrTooLarge) {
				t.Errorf("%s: flip at %d: unwrapped error %v", c, i, err)
			}
		}
	}
	var d Decompressor
	if _, err := d.Decompress(Codec(6), []byte{1}, 10); !errors.Is(err, ErrUnknownCodec) {
		t.Errorf("codec 6: %v", err)
	}
}

func TestCompressedBuildAllocations(t *testing.T) {
	for _, c := range allCodecs {
		opts := DefaultBuilderOptions()
		opts.Compression = c
		bl := NewBuilder(opts)
		r := Record{Timestamp: 1, Value: logLines(200)}
		run := func() {
			bl.Reset(opts)
			for range 80 {
				bl.Append(&r)
			}
			if _, err := bl.Build(); err != nil {
				t.Fatal(err)
			}
		}
		run()
		allocs := testing.AllocsPerRun(20, run)
		t.Logf("%s: %v allocs per 16 KiB Build", c, allocs)
		if allocs > 0 && !raceEnabled {
			t.Errorf("%s: %v allocs per Build; encoders and buffers should be reused", c, allocs)
		}
	}
}

func TestLZ4LinkedBlocks(t *testing.T) {
	// A hand-made frame with linked (dependent) blocks, as an LZ4F default
	// writer may send: block 2 copies 16 bytes from block 1.
	frame := []byte{0x04, 0x22, 0x4D, 0x18, 0x40, 0x40, 0x00} // FLG: linked blocks; HC not checked
	frame = append(frame, 16, 0, 0, 0x80)                     // stored block of 16 bytes
	frame = append(frame, "0123456789abcdef"...)
	block2 := []byte{0x0C, 0x10, 0x00, 0x50, 'X', 'Y', 'Z', 'W', 'V'} // match 16 at offset 16; 5 literals
	frame = binary.LittleEndian.AppendUint32(frame, uint32(len(block2)))
	frame = append(frame, block2...)
	frame = append(frame, 0, 0, 0, 0)
	var d Decompressor
	got, err := d.Decompress(LZ4, frame, 1<<10)
	if want := "0123456789abcdef0123456789abcdefXYZWV"; err != nil || string(got) != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	if _, err := d.Decompress(LZ4, frame, 20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("cap 20: %v", err)
	}
}
