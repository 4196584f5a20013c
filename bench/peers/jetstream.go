package peers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/bench"
)

// JetStreamDriver drives NATS JetStream with nats.go: one stream per topic (file storage, one
// replica, subject = the topic), async publishes acknowledged by JetStream, and ordered (or,
// with a group, durable pull) consumers from the first message.
//
// JetStream has no partitions, batch size or linger: CreateTopic ignores partitions, and
// ProducerOptions.BatchSize and LingerMs have no effect. Compression other than "none" turns on
// the stream's S2 storage compression (compression at rest, not on the wire).
type JetStreamDriver struct {
	name  string
	url   string
	nc    *nats.Conn // for stream administration
	js    jetstream.JetStream
	srv   *server.Server // non-nil when the driver started nats-server in-process
	conns []*nats.Conn   // producers' and consumers' connections, closed by Close
	mu    sync.Mutex
}

var _ bench.Driver = (*JetStreamDriver)(nil)

// keyHeader carries a record's key, which JetStream messages do not have.
const keyHeader = "Bench-Key"

// NewJetStream returns a driver for the NATS server at url (nats://host:port), which must have
// JetStream enabled.
func NewJetStream(ctx context.Context, url string) (*JetStreamDriver, error) {
	return newJetStream(ctx, "nats", url, nil)
}

// StartJetStream starts nats-server in-process on a random loopback port, without logging, with
// JetStream file storage in dataDir, and returns a driver for it; Close shuts the server down.
func StartJetStream(ctx context.Context, dataDir string) (*JetStreamDriver, error) {
	if dataDir == "" {
		return nil, errors.New("jetstream: empty data directory")
	}
	opts := &server.Options{
		ServerName: "sluice-bench",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		HTTPPort:   0,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   dataDir,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	go s.Start()
	deadline := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		deadline = min(deadline, max(time.Until(dl), time.Millisecond))
	}
	if !s.ReadyForConnections(deadline) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, errors.New("jetstream: embedded nats-server did not start")
	}
	d, err := newJetStream(ctx, "jetstream", s.ClientURL(), s)
	if err != nil {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, err
	}
	return d, nil
}

func newJetStream(ctx context.Context, name, url string, s *server.Server) (*JetStreamDriver, error) {
	nc, err := connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: JetStream not available at %s: %w", name, url, err)
	}
	return &JetStreamDriver{name: name, url: url, nc: nc, js: js, srv: s}, nil
}

func connect(ctx context.Context, url string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name("sluice-bench"), nats.MaxReconnects(-1)}
	if dl, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(max(time.Until(dl), time.Millisecond)))
	}
	return nats.Connect(url, opts...)
}

// newConn opens a connection owned by the driver (closed by Close if the user does not).
func (d *JetStreamDriver) newConn(ctx context.Context) (*nats.Conn, error) {
	nc, err := connect(ctx, d.url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	d.mu.Lock()
	d.conns = append(d.conns, nc)
	d.mu.Unlock()
	return nc, nil
}

// Name implements bench.Driver.
func (d *JetStreamDriver) Name() string { return d.name }

// URL returns the server's client URL (the embedded server's when started in-process).
func (d *JetStreamDriver) URL() string { return d.url }

// StreamName maps a topic to a valid stream name (no '.', '*', '>', whitespace or path
// separators).
func StreamName(topic string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', '*', '>', '/', '\\', ' ', '\t', '\r', '\n':
			return '_'
		}
		return r
	}, topic)
}

// CreateTopic creates (or updates) the topic's stream: file storage, one replica, subject topic.
// JetStream streams are not partitioned, so partitions is ignored.
func (d *JetStreamDriver) CreateTopic(ctx context.Context, topic string, partitions int) error {
	if topic == "" {
		return errors.New("jetstream driver: empty topic")
	}
	_, err := d.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:     StreamName(topic),
		Subjects: []string{topic},
		Storage:  jetstream.FileStorage,
		Replicas: 1,
	})
	if err != nil {
		return fmt.Errorf("%s: create stream for %q: %w", d.name, topic, err)
	}
	return nil
}

// DeleteTopic implements bench.TopicDeleter: it deletes the topic's stream.
func (d *JetStreamDriver) DeleteTopic(ctx context.Context, topic string) error {
	if err := d.js.DeleteStream(ctx, StreamName(topic)); err != nil {
		return fmt.Errorf("jetstream driver: delete stream of %q: %w", topic, err)
	}
	return nil
}

// NewProducer implements bench.Driver. acks 1 and -1 both use async publishes completed by
// JetStream's PubAck (a single-replica stream has no difference between them); acks 0 uses core
// NATS publishes, which JetStream stores but does not acknowledge.
func (d *JetStreamDriver) NewProducer(ctx context.Context, opts bench.ProducerOptions) (bench.Producer, error) {
	if opts.Topic == "" {
		return nil, errors.New("jetstream driver: producer without topic")
	}
	if opts.Acks != -1 && opts.Acks != 0 && opts.Acks != 1 {
		return nil, fmt.Errorf("jetstream driver: acks %d: want -1, 0 or 1", opts.Acks)
	}
	switch c := strings.ToLower(opts.Compression); c {
	case "", "none":
	case "gzip", "snappy", "lz4", "zstd":
		if err := d.compressStream(ctx, opts.Topic); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("jetstream driver: unknown compression %q", opts.Compression)
	}
	nc, err := d.newConn(ctx)
	if err != nil {
		return nil, err
	}
	p := &jsProducer{nc: nc, subject: opts.Topic, acks: opts.Acks, ack: opts.Ack, pending: make(map[*nats.Msg]time.Time)}
	p.pubOpts = []jetstream.PublishOpt{jetstream.WithStallWait(time.Minute)}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(16384),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
			p.complete(m, nil)
		}),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			p.complete(m, err)
		}))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	p.js = js
	return p, nil
}

// compressStream turns on S2 storage compression for the topic's stream.
func (d *JetStreamDriver) compressStream(ctx context.Context, topic string) error {
	s, err := d.js.Stream(ctx, StreamName(topic))
	if err != nil {
		return fmt.Errorf("%s: stream for %q: %w", d.name, topic, err)
	}
	cfg := s.CachedInfo().Config
	if cfg.Compression == jetstream.S2Compression {
		return nil
	}
	cfg.Compression = jetstream.S2Compression
	if _, err := d.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("%s: compress stream for %q: %w", d.name, topic, err)
	}
	return nil
}

type jsProducer struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	acks    int
	ack     bench.AckFunc
	pubOpts []jetstream.PublishOpt

	mu      sync.Mutex
	pending map[*nats.Msg]time.Time // sent, not yet acknowledged: when
	n       int                     // sends whose ack has not returned yet
	idle    chan struct{}           // closed when n drops to 0; nil while nobody waits
}

func (p *jsProducer) Send(ctx context.Context, key, value []byte, sent time.Time) {
	if err := ctx.Err(); err != nil {
		p.ack(sent, len(value), err)
		return
	}
	// nats.go writes the message into the connection's buffer before returning, so key and value
	// are not retained.
	m := &nats.Msg{Subject: p.subject, Data: value}
	if len(key) > 0 {
		m.Header = nats.Header{keyHeader: []string{string(key)}}
	}
	if p.acks == 0 {
		p.ack(sent, len(value), p.nc.PublishMsg(m))
		return
	}
	p.mu.Lock()
	p.pending[m] = sent // before publishing: the ack may arrive before PublishMsgAsync returns
	p.n++
	p.mu.Unlock()
	if _, err := p.js.PublishMsgAsync(m, p.pubOpts...); err != nil {
		p.complete(m, err)
	}
}

// complete acknowledges m once (from the ack handler, the error handler or a failed publish).
func (p *jsProducer) complete(m *nats.Msg, err error) {
	p.mu.Lock()
	sent, ok := p.pending[m]
	delete(p.pending, m)
	p.mu.Unlock()
	if ok {
		p.ack(sent, len(m.Data), err)
		p.finished(1)
	}
}

// finished records that k acks have returned, waking Flush when none is left.
func (p *jsProducer) finished(k int) {
	p.mu.Lock()
	p.n -= k
	if p.n == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
}

// Flush waits until every message sent so far is acknowledged (acks 0: until the server has
// received them).
func (p *jsProducer) Flush(ctx context.Context) error {
	if p.acks == 0 {
		return p.nc.FlushWithContext(ctx)
	}
	p.mu.Lock()
	if p.n == 0 {
		p.mu.Unlock()
		return nil
	}
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close fails the messages still unacknowledged and closes the producer's connection.
func (p *jsProducer) Close() error {
	p.nc.Close()
	p.mu.Lock()
	left := p.pending
	p.pending = make(map[*nats.Msg]time.Time)
	p.mu.Unlock()
	for m, sent := range left {
		p.ack(sent, len(m.Data), nats.ErrConnectionClosed)
	}
	p.finished(len(left))
	return nil
}

// NewConsumer implements bench.Driver: an ordered consumer of the whole stream from its first
// message or, with opts.Group, the durable pull consumer named after the group (ack-all, acked
// once per Poll, like a periodic commit).
func (d *JetStreamDriver) NewConsumer(ctx context.Context, opts bench.ConsumerOptions) (bench.Consumer, error) {
	if opts.Topic == "" {
		return nil, errors.New("jetstream driver: consumer without topic")
	}
	if opts.FetchBytes > 0 {
		// The nearest thing, a byte limit on each pull request (PullMaxMessagesWithBytesLimit),
		// stalled the consumer for seconds in 2 of 8 test runs on a loaded machine; a figure
		// taken with it would measure the stall.
		return nil, errors.New("jetstream driver: no fetch size (a byte-limited pull stalls)")
	}
	nc, err := d.newConn(ctx)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	stream := StreamName(opts.Topic)
	var cons jetstream.Consumer
	if opts.Group == "" {
		cons, err = js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
	} else {
		cons, err = js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable:       StreamName(opts.Group),
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckAllPolicy,
			MaxAckPending: 1 << 16,
		})
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: consumer on %q: %w", d.name, stream, err)
	}
	c := &jsConsumer{
		nc:     nc,
		ack:    opts.Group != "",
		ch:     make(chan jetstream.Msg, 4096),
		closed: make(chan struct{}),
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case c.ch <- m:
		case <-c.closed:
		}
	}, jetstream.PullMaxMessages(1024))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: consume %q: %w", d.name, stream, err)
	}
	c.cc = cc
	return c, nil
}

type jsConsumer struct {
	nc     *nats.Conn
	cc     jetstream.ConsumeContext
	ack    bool
	ch     chan jetstream.Msg
	closed chan struct{}
	once   sync.Once
	msgs   []bench.Message
}

// maxPoll bounds the messages one Poll returns.
const maxPoll = 4096

// Poll waits for a message, then returns it with whatever else has already arrived.
func (c *jsConsumer) Poll(ctx context.Context) ([]bench.Message, error) {
	var m jetstream.Msg
	select {
	case m = <-c.ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, errors.New("jetstream driver: consumer closed")
	}
	c.msgs = append(c.msgs[:0], bench.Message{Value: m.Data(), Timestamp: timestamp(m)})
drain:
	for len(c.msgs) < maxPoll {
		select {
		case m = <-c.ch:
			c.msgs = append(c.msgs, bench.Message{Value: m.Data(), Timestamp: timestamp(m)})
		default:
			break drain
		}
	}
	if c.ack {
		if err := m.Ack(); err != nil { // ack-all: acknowledges the whole batch
			return nil, fmt.Errorf("jetstream driver: ack: %w", err)
		}
	}
	return c.msgs, nil
}

func timestamp(m jetstream.Msg) int64 {
	md, err := m.Metadata()
	if err != nil {
		return 0
	}
	return md.Timestamp.UnixMilli()
}

func (c *jsConsumer) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.cc.Stop()
		c.nc.Close()
	})
	return nil
}

// Close implements bench.Driver: closes every connection the driver opened and shuts down the
// embedded server if it started one (its data directory is left to the caller).
func (d *JetStreamDriver) Close() error {
	d.mu.Lock()
	conns := d.conns
	d.conns = nil
	d.mu.Unlock()
	for _, nc := range conns {
		nc.Close()
	}
	d.nc.Close()
	if d.srv != nil {
		d.srv.Shutdown()
		d.srv.WaitForShutdown()
	}
	return nil
}
