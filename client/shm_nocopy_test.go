package client

import (
	"testing"

	"github.com/sluicemq/sluice/net/wire"
)

// A Produce request none of whose batches lies in the region (compressed batches, which the
// builder writes outside its slot; batches of a large record; a region that ran out of slots)
// goes out as a plain Produce by writev, without copying its batches (sharedRequestLocked once
// decided that only after copying every batch into c.inline: one extra copy of every byte of
// such requests, and a per-connection buffer grown to the largest request, kept).
func TestNoCopyWhenNothingIsShared(t *testing.T) {
	region := &SharedRegion{mem: make([]byte, 1<<20)}
	c := &Conn{shm: region}
	compressed := make([]byte, 512<<10) // e.g. an lz4 batch in the builder's out buffer
	req := &wire.ProduceRequest{Acks: 1, TimeoutMs: 1000, Topics: []wire.ProduceRequestTopic{{
		Topic: "t", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: compressed}},
	}}}
	c.wmu.Lock()
	_, shared := c.sharedRequestLocked(req)
	c.wmu.Unlock()
	if shared {
		t.Fatal("a request with no batch in the region went as ProduceShared")
	}
	if cap(c.inline) >= len(compressed) {
		t.Errorf("deciding that nothing is shared copied the batches: c.inline holds %d bytes (cap %d)", len(c.inline), cap(c.inline))
	}
}

// A batch in one of the region's buffers goes as a span naming the buffer's guard word and its
// value at the time of sending; one in a region not carved into buffers goes unguarded.
func TestSharedSpansNameTheirGuards(t *testing.T) {
	region := &SharedRegion{mem: make([]byte, 1<<20)}
	region.carve(64 << 10)
	slot := region.takeSlot()
	region.renew(slot)
	region.renew(slot)
	off, _ := region.offsetOf(slot)
	c := &Conn{shm: region}
	req := &wire.ProduceRequest{Acks: 1, TimeoutMs: 1000, Topics: []wire.ProduceRequestTopic{{
		Topic: "t", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: slot[:1000]}},
	}}}
	c.wmu.Lock()
	sreq, shared := c.sharedRequestLocked(req)
	c.wmu.Unlock()
	if !shared {
		t.Fatal("a batch in the region did not go as a span")
	}
	var spans []wire.SharedPart
	for _, p := range sreq.Parts {
		if p.Length > 0 {
			spans = append(spans, p)
		} else if p.GuardOffset != -1 {
			t.Errorf("a part with no span names guard %d", p.GuardOffset)
		}
	}
	if len(spans) != 1 || spans[0].Offset != off || spans[0].GuardOffset != off-slotGuardBytes || spans[0].Guard != 2 {
		t.Fatalf("spans %+v, want one at %d guarded by the word at %d holding 2", spans, off, off-slotGuardBytes)
	}

	c = &Conn{shm: &SharedRegion{mem: make([]byte, 1<<20)}}
	req.Topics[0].Partitions[0].Records = c.shm.mem[4096:5096]
	c.wmu.Lock()
	sreq, _ = c.sharedRequestLocked(req)
	c.wmu.Unlock()
	for _, p := range sreq.Parts {
		if p.GuardOffset != -1 {
			t.Errorf("a span of a region not carved names guard %d", p.GuardOffset)
		}
	}
}

// In a region carved into guarded buffers, bytes that no guard covers (never a producer's
// batch, which stays within its buffer) go inline rather than as an unguarded span.
func TestUnguardedBytesOfACarvedRegionGoInline(t *testing.T) {
	region := &SharedRegion{mem: make([]byte, 1<<20)}
	region.carve(64 << 10)
	c := &Conn{shm: region}
	req := &wire.ProduceRequest{Acks: 1, TimeoutMs: 1000, Topics: []wire.ProduceRequestTopic{{
		Topic: "t", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: region.mem[10:1000]}},
	}}}
	c.wmu.Lock()
	_, shared := c.sharedRequestLocked(req)
	c.wmu.Unlock()
	if shared {
		t.Fatal("bytes across a guard word went as a span")
	}
}
