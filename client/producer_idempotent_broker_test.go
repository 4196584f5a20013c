package client_test

// The idempotent producer against an in-process broker whose Produce answers are lost: a
// connection wrapper (dropConn) closes the connection instead of handing the client every third
// Produce response, after the broker appended the batches. The client sends them again; the
// broker's producer state recognizes them, so the log holds each record once, in order.

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// dropConn passes a connection's bytes through, but at every dropEvery-th Produce response it
// closes the connection instead of delivering it.
type dropConn struct {
	net.Conn
	drops     *atomic.Int64 // responses dropped so far, shared by a test's connections
	produces  *atomic.Int64 // Produce responses seen, shared
	dropEvery int64

	wmu     sync.Mutex
	wbuf    []byte
	produce map[int32]bool // correlation ids of Produce requests written

	rbuf, ready []byte
}

func (c *dropConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	c.wbuf = append(c.wbuf, p...)
	for len(c.wbuf) >= 12 {
		n := int(binary.BigEndian.Uint32(c.wbuf))
		if len(c.wbuf) < 4+n {
			break
		}
		key := wire.APIKey(binary.BigEndian.Uint16(c.wbuf[4:]))
		if key == wire.Produce {
			c.produce[int32(binary.BigEndian.Uint32(c.wbuf[8:]))] = true
		}
		c.wbuf = c.wbuf[4+n:]
	}
	c.wmu.Unlock()
	return c.Conn.Write(p)
}

func (c *dropConn) Read(p []byte) (int, error) {
	for len(c.ready) == 0 {
		if len(c.rbuf) >= 8 {
			n := int(binary.BigEndian.Uint32(c.rbuf))
			if len(c.rbuf) >= 4+n {
				id := int32(binary.BigEndian.Uint32(c.rbuf[4:]))
				c.wmu.Lock()
				isProduce := c.produce[id]
				delete(c.produce, id)
				c.wmu.Unlock()
				if isProduce && c.produces.Add(1)%c.dropEvery == 0 {
					c.drops.Add(1)
					_ = c.Conn.Close()
					return 0, net.ErrClosed
				}
				c.ready = append(c.ready, c.rbuf[:4+n]...)
				c.rbuf = c.rbuf[4+n:]
				continue
			}
		}
		buf := make([]byte, 64<<10)
		m, err := c.Conn.Read(buf)
		c.rbuf = append(c.rbuf, buf[:m]...)
		if err != nil && m == 0 {
			return 0, err
		}
	}
	n := copy(p, c.ready)
	c.ready = c.ready[n:]
	return n, nil
}

func TestProducerIdempotentLostAnswersInProcessBroker(t *testing.T) {
	b := startBroker(t)
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "lost", 1)
	var drops, produces atomic.Int64
	dial := func(ctx context.Context, network, a string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, a)
		if err != nil {
			return nil, err
		}
		return &dropConn{Conn: nc, drops: &drops, produces: &produces, dropEvery: 3, produce: map[int32]bool{}}, nil
	}
	p := prodNew(t, client.ProducerConfig{Config: client.Config{Brokers: []string{addr}, Dial: dial, SharedMemoryBytes: -1},
		BatchSize: 200, Linger: time.Millisecond, RetryBackoff: time.Millisecond, RetryBackoffMax: 5 * time.Millisecond})
	ctx := prodCtx(t, time.Minute)
	const n = 300
	var mu sync.Mutex
	errs := 0
	for i := range n {
		p.Send(ctx, &client.Record{Topic: "lost", Partition: 0, PartitionSet: true, Value: fmt.Appendf(nil, "v%04d", i)},
			func(_ client.RecordMetadata, err error) {
				if err != nil {
					mu.Lock()
					errs++
					mu.Unlock()
				}
			})
		if i%10 == 9 { // rounds of a few requests each: many answers to lose
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if errs > 0 || drops.Load() == 0 {
		t.Fatalf("%d records failed, %d answers dropped", errs, drops.Load())
	}
	var got []string
	for _, bt := range prodFetch(t, addr, "lost", 0, n) {
		for _, r := range bt.records {
			got = append(got, string(r.Value))
		}
	}
	if len(got) != n {
		t.Fatalf("%d records in the log after %d lost answers, want %d once each", len(got), drops.Load(), n)
	}
	for i, v := range got {
		if v != fmt.Sprintf("v%04d", i) {
			t.Fatalf("record %d is %s: out of order or duplicated", i, v)
		}
	}
	t.Logf("%d answers lost, %d records once each, in order", drops.Load(), n)
}
