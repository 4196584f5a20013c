package client

import (
	"testing"

	"github.com/sluicemq/sluice/batch"
)

// offsetOf finds a slice's place in the region only when the slice lies wholly inside it.
func TestSharedRegionOffsetOf(t *testing.T) {
	backing := make([]byte, 300)
	r := &SharedRegion{mem: backing[100:200]}
	for _, tc := range []struct {
		name string
		b    []byte
		off  int64
		ok   bool
	}{
		{"whole", backing[100:200], 0, true},
		{"inside", backing[150:160], 50, true},
		{"at the end", backing[199:200], 99, true},
		{"starts before", backing[99:110], 0, false},
		{"ends after", backing[190:201], 0, false},
		{"after", backing[200:210], 0, false},
		{"elsewhere", make([]byte, 10), 0, false},
		{"empty", backing[150:150], 0, false},
	} {
		off, ok := r.offsetOf(tc.b)
		if ok != tc.ok || (ok && off != tc.off) {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, off, ok, tc.off, tc.ok)
		}
	}
}

// carve cuts whole buffers only, and takeSlot and putSlot hand them out and back.
func TestSharedRegionSlots(t *testing.T) {
	r := &SharedRegion{mem: make([]byte, 1000)}
	r.carve(300)
	var got [][]byte
	for s := r.takeSlot(); s != nil; s = r.takeSlot() {
		if len(s) != 300 || cap(s) != 300 {
			t.Fatalf("slot of len %d cap %d", len(s), cap(s))
		}
		if _, ok := r.offsetOf(s); !ok {
			t.Fatal("slot outside the region")
		}
		got = append(got, s)
	}
	// Each buffer follows its 64-byte guard word, at a 64-byte-aligned stride: 2 of 384 bytes.
	if len(got) != 2 {
		t.Fatalf("%d slots of 300 in 1000 bytes, want 2", len(got))
	}
	for _, s := range got {
		off, _ := r.offsetOf(s)
		if off%64 != 0 {
			t.Errorf("buffer at %d: not cache-line aligned", off)
		}
		if g, guard := r.guardOf(off, len(s)); guard == nil || g != off-slotGuardBytes {
			t.Errorf("buffer at %d: guard at %d (%v), want %d", off, g, guard != nil, off-slotGuardBytes)
		}
	}
	r.putSlot(got[1])
	if s := r.takeSlot(); &s[0] != &got[1][0] {
		t.Fatal("a slot given back was not handed out again")
	}
	if r.write(func() {}) != true {
		t.Fatal("write refused on an open region")
	}
	r.closed = true
	if r.write(func() { t.Fatal("wrote to a closed region") }) {
		t.Fatal("write ran on a closed region")
	}
}

// A recycled batch keeps its slot, whatever happened to the request that carried it last, and a
// batch the pool cannot keep returns its slot to the region.
func TestRecycleBatchSlots(t *testing.T) {
	r := &SharedRegion{mem: make([]byte, 4096)}
	r.carve(1024) // 3 slots
	p := &Producer{region: r}
	p.cfg.BatchSize = 1024
	p.batches.max = 1
	newSlotted := func() *accBatch {
		b := &accBatch{builder: batch.NewBuilder(batch.DefaultBuilderOptions())}
		b.slot = r.takeSlot()
		b.builder.UseBuffer(b.slot)
		return b
	}
	free := func() int { return len(r.free) }

	kept := newSlotted() // 2 free
	p.recycleBatch(kept)
	if free() != 2 || p.batches.get() != kept || kept.slot == nil {
		t.Fatalf("a recycled batch: %d free slots, slot %v", free(), kept.slot != nil)
	}
	p.recycleBatch(kept)  // back in the pool (max 1)
	extra := newSlotted() // 1 free
	p.recycleBatch(extra)
	if free() != 2 {
		t.Fatalf("a batch the pool could not keep: %d free slots, want its slot back (2)", free())
	}
}

// guardOf finds the guard of the buffer a span lies in, and none for a span that reaches into a
// guard or past its buffer.
func TestSharedRegionGuardOf(t *testing.T) {
	r := &SharedRegion{mem: make([]byte, 4096)}
	r.carve(1000) // stride 1088: buffers at 64, 1152, 2240
	for _, tc := range []struct {
		off   int64
		n     int
		guard int64
	}{
		{64, 1000, 0}, {100, 10, 0}, {1152, 1000, 1088}, {2240 + 999, 1, 2176},
		{0, 10, -1}, {60, 10, -1}, {1100, 100, -1}, {1152, 1025, -1},
	} {
		g, guard := r.guardOf(tc.off, tc.n)
		if g != tc.guard || (guard != nil) != (tc.guard >= 0) {
			t.Errorf("span [%d, +%d): guard %d (%v), want %d", tc.off, tc.n, g, guard != nil, tc.guard)
		}
	}
	if g, guard := (&SharedRegion{mem: make([]byte, 4096)}).guardOf(64, 10); guard != nil || g != -1 {
		t.Errorf("a region not carved: guard %d", g)
	}
}

// A buffer is reused whatever happened to the request that carried its last batch (the one
// that got no response included), and its guard word changes before new records are written
// into it, so that a broker reading that old request late refuses it.
func TestSlotReuseRenewsTheGuard(t *testing.T) {
	r := &SharedRegion{mem: make([]byte, 4096)}
	r.carve(1024)
	p := &Producer{region: r}
	p.cfg.BatchSize = 1024
	p.builderOpts = batch.DefaultBuilderOptions()
	p.batches.max = 4
	ap := &accPartition{}
	b := p.newBatch(ap, 0)
	if b.slot == nil {
		t.Fatal("no slot")
	}
	off, _ := r.offsetOf(b.slot)
	_, guard := r.guardOf(off, len(b.slot))
	before := guard.Load()
	slot := &b.slot[0]
	p.recycleBatch(b)
	b = p.newBatch(ap, 0)
	if &b.slot[0] != slot {
		t.Fatal("the pooled batch came back without its slot")
	}
	if guard.Load() == before {
		t.Fatal("a reused slot kept its guard value")
	}
}

// The default region holds a buffer for every batch buffer.memory holds, guards included,
// and a region too small for one buffer is not made at all.
func TestDefaultRegionHoldsEveryBatch(t *testing.T) {
	for _, codec := range []batch.Codec{batch.None, batch.LZ4} {
		cfg, err := ProducerConfig{Config: Config{Brokers: []string{"unix:///nonexistent.sock"}}, Compression: codec}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		r := newProducerRegion(cfg)
		if r == nil {
			t.Skip("no memfds here")
		}
		want := int(cfg.BufferMemory / int64(cfg.BatchSize))
		if got := len(r.free); got < want {
			t.Errorf("%s: %d buffers, want %d (buffer.memory / batch.size)", codec, got, want)
		}
		r.Close()
		cfg.SharedMemoryBytes = slotStride(slotSize(cfg)) - 1
		if r := newProducerRegion(cfg); r != nil {
			r.Close()
			t.Errorf("%s: a region with room for no buffer was made", codec)
		}
	}
}
