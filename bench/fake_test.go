package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// fakeClock is a Clock that moves only when told to (or when a sleeper asks for a later time).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) NewSleeper(time.Duration) Sleeper { return fakeSleeper{c} }

// fakeSleeper moves its clock forward to each due time.
type fakeSleeper struct{ c *fakeClock }

func (s fakeSleeper) Close() error { return nil }

func (s fakeSleeper) SleepUntil(ctx context.Context, t time.Time) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	return ctx.Err()
}

// memDriver is an in-memory Driver: topics are slices of values; producers append and
// acknowledge at once (after sendHook, which tests use to stall the clock); consumers read
// from the beginning.
type memDriver struct {
	sendHook func(n int64) // called before each send is acknowledged, with the count so far
	mu       struct {
		sync.Mutex
		topics  map[string][][]byte
		deleted []string // topics deleted, in order
		sent    int64
		more    chan struct{} // closed and replaced on every append
	}
}

func newMemDriver() *memDriver {
	d := &memDriver{}
	d.mu.topics = map[string][][]byte{}
	d.mu.more = make(chan struct{})
	return d
}

func (d *memDriver) Name() string { return "mem" }

func (d *memDriver) CreateTopic(_ context.Context, topic string, _ int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.mu.topics[topic]; !ok {
		d.mu.topics[topic] = nil
	}
	return nil
}

func (d *memDriver) DeleteTopic(_ context.Context, topic string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.mu.topics[topic]; !ok {
		return fmt.Errorf("mem: no topic %q", topic)
	}
	delete(d.mu.topics, topic)
	d.mu.deleted = append(d.mu.deleted, topic)
	return nil
}

func (d *memDriver) NewProducer(_ context.Context, o ProducerOptions) (Producer, error) {
	return &memProducer{d: d, topic: o.Topic, ack: o.Ack}, nil
}

func (d *memDriver) NewConsumer(_ context.Context, o ConsumerOptions) (Consumer, error) {
	return &memConsumer{d: d, topic: o.Topic}, nil
}

func (d *memDriver) Close() error { return nil }

type memProducer struct {
	d     *memDriver
	topic string
	ack   AckFunc
	sends atomic.Int64
}

// SentRequests implements RequestCounter as if every record were a batch of its own and four
// batches went in a request.
func (p *memProducer) SentRequests() (requests, batches int64) {
	n := p.sends.Load()
	return (n + 3) / 4, n
}

func (p *memProducer) Send(_ context.Context, _, value []byte, sent time.Time) {
	d := p.d
	d.mu.Lock()
	d.mu.topics[p.topic] = append(d.mu.topics[p.topic], append([]byte(nil), value...))
	d.mu.sent++
	n := d.mu.sent
	close(d.mu.more)
	d.mu.more = make(chan struct{})
	d.mu.Unlock()
	p.sends.Add(1)
	if d.sendHook != nil {
		d.sendHook(n)
	}
	p.ack(sent, len(value), nil)
}

func (p *memProducer) Flush(context.Context) error { return nil }
func (p *memProducer) Close() error                { return nil }

type memConsumer struct {
	d     *memDriver
	topic string
	next  int
}

func (c *memConsumer) Poll(ctx context.Context) ([]Message, error) {
	for {
		c.d.mu.Lock()
		vals := c.d.mu.topics[c.topic][c.next:]
		more := c.d.mu.more
		c.d.mu.Unlock()
		if len(vals) > 0 {
			c.next += len(vals)
			out := make([]Message, len(vals))
			for i, v := range vals {
				out[i] = Message{Value: v}
			}
			return out, nil
		}
		select {
		case <-more:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *memConsumer) Close() error { return nil }
