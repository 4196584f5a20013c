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
