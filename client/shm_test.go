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
	if len(got) != 3 {
		t.Fatalf("%d slots of 300 in 1000 bytes", len(got))
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

// A batch whose slot a broker may still read (its request got no response) gives the slot up
// for good; any other batch keeps its slot, and a batch the pool cannot keep returns its slot
// to the region.
func TestRecycleBatchSlots(t *testing.T) {
	r := &SharedRegion{mem: make([]byte, 4096)}
	r.carve(1024)
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

	kept := newSlotted() // 3 free
	p.recycleBatch(kept)
	if free() != 3 || p.batches.get() != kept || kept.slot == nil {
		t.Fatalf("a recycled batch: %d free slots, slot %v", free(), kept.slot != nil)
	}

	frozen := newSlotted() // 2 free
	frozen.frozen = true
	p.recycleBatch(frozen)
	if free() != 2 || frozen.slot != nil || frozen.frozen {
		t.Fatalf("a frozen batch: %d free slots, slot %v, frozen %v", free(), frozen.slot != nil, frozen.frozen)
	}
	if bt := frozen.builder; true {
		bt.Append(&batch.Record{Value: []byte("x")})
		built, err := bt.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, in := r.offsetOf(built); in {
			t.Fatal("a frozen batch's next records are built in the region")
		}
	}

	extra := newSlotted() // 1 free; the pool (max 1) holds frozen
	p.recycleBatch(extra)
	if free() != 2 {
		t.Fatalf("a batch the pool could not keep: %d free slots, want its slot back (2)", free())
	}
}
