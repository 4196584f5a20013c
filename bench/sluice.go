package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// Transports of the Sluice driver.
const (
	TransportTCP  = "tcp"
	TransportUnix = "unix"
)

// SluiceDriver is the Driver for Sluice through its Go client, over TCP or the unix socket
// (whichever the address names).
type SluiceDriver struct {
	name    string
	brokers []string // the clients' bootstrap list (one address but for a cluster)
	logger  *slog.Logger
	admin   *client.Admin
	// topics is how CreateTopic makes a topic (replication factor, configs): the zero value
	// takes the broker's defaults, as a one-broker run does.
	topics TopicShape
}

// NewSluiceDriver connects to the broker at addr ("host:port" or "unix:///path"); name labels
// the reports.
func NewSluiceDriver(ctx context.Context, name, addr string, logger *slog.Logger) (*SluiceDriver, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	a, err := client.NewAdmin(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("bench: connect to %s: %w", addr, err)
	}
	return &SluiceDriver{name: name, brokers: []string{addr}, logger: logger, admin: a}, nil
}

// Name implements Driver.
func (d *SluiceDriver) Name() string { return d.name }

// CreateTopic implements Driver; a topic that exists already is used as is.
func (d *SluiceDriver) CreateTopic(ctx context.Context, topic string, partitions int) error {
	err := d.admin.CreateTopic(ctx, d.topics.spec(topic, partitions))
	if errors.Is(err, wire.ErrTopicAlreadyExists) {
		return nil
	}
	return err
}

// DeleteTopic implements TopicDeleter.
func (d *SluiceDriver) DeleteTopic(ctx context.Context, topic string) error {
	return d.admin.DeleteTopic(ctx, topic)
}

func (d *SluiceDriver) config(id string) client.Config {
	return client.Config{Brokers: d.brokers, ClientID: id, Logger: d.logger}
}

// NewProducer implements Driver.
func (d *SluiceDriver) NewProducer(ctx context.Context, o ProducerOptions) (Producer, error) {
	var acks client.Acks
	switch o.Acks {
	case -1:
		acks = client.AcksAll
	case 1:
		acks = client.AcksLeader
	case 0:
		acks = client.AcksNone
	default:
		return nil, fmt.Errorf("bench: acks %d: want -1, 0 or 1", o.Acks)
	}
	codec, err := batch.ParseCodec(o.Compression)
	if err != nil {
		return nil, err
	}
	linger := time.Duration(o.LingerMs) * time.Millisecond
	if linger <= 0 {
		linger = -1 // linger.ms=0 (zero would take the default)
	}
	cfg := d.config("sluice-bench-producer")
	if o.NoSharedMemory {
		cfg.SharedMemoryBytes = -1
	}
	p, err := client.NewProducer(ctx, client.ProducerConfig{
		Config: cfg,
		Acks:   acks, Compression: codec, BatchSize: o.BatchSize, Linger: linger,
		EnableIdempotence: o.Idempotence,
	})
	if err != nil {
		return nil, err
	}
	ack := o.Ack
	return &sluiceProducer{p: p, topic: o.Topic, cb: func(md client.RecordMetadata, err error) {
		ack(md.Timestamp, max(md.ValueSize, 0), err)
	}}, nil
}

type sluiceProducer struct {
	p     *client.Producer
	topic string
	cb    func(client.RecordMetadata, error) // one for every record: md.Timestamp is sent
}

func (p *sluiceProducer) Send(ctx context.Context, key, value []byte, sent time.Time) {
	rec := client.Record{Topic: p.topic, Partition: client.PartitionAny, Key: key, Value: value, Timestamp: sent}
	p.p.Send(ctx, &rec, p.cb)
}

func (p *sluiceProducer) Flush(ctx context.Context) error { return p.p.Flush(ctx) }

var (
	_ RequestCounter       = (*sluiceProducer)(nil)
	_ SharedRequestCounter = (*sluiceProducer)(nil)
)

// SharedRequests implements SharedRequestCounter.
func (p *sluiceProducer) SharedRequests() int64 { return p.p.Stats().SharedRequests }

// SentRequests implements RequestCounter.
func (p *sluiceProducer) SentRequests() (requests, batches int64) {
	st := p.p.Stats()
	return st.Requests, st.Batches
}

func (p *sluiceProducer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.p.Close(ctx)
}

// NewConsumer implements Driver: every partition of the topic, from the beginning (a group
// resumes from its committed offsets). The harness reads each Poll's values before the next
// Poll, so the consumer reuses its fetch and decompression buffers (ReuseRecordBuffers), as an
// application that processes records in place would.
//
// In a group the client's auto-commit is off and the consumer commits once, as it closes
// (commit): auto-commit commits every record Poll returned, and a run of Records counts only
// part of its last Poll (Rewinder). So the consume path does no more than without a group:
// no periodic commits, no bookkeeping per record.
func (d *SluiceDriver) NewConsumer(ctx context.Context, o ConsumerOptions) (Consumer, error) {
	cfg := client.ConsumerConfig{
		Config: d.config("sluice-bench-consumer"), GroupID: o.Group, AutoOffsetReset: client.OffsetResetEarliest,
		ReuseRecordBuffers: true,
	}
	if o.Group != "" {
		cfg.EnableAutoCommit = new(false)
	}
	if o.FetchBytes > 0 {
		cfg.MaxPartitionFetchBytes = o.FetchBytes
		cfg.FetchMaxBytes = max(o.FetchBytes, KafkaFetchMaxBytes)
	}
	if o.NoFileReads {
		cfg.FileReads = new(false)
	}
	c, err := client.NewConsumer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sc := &sluiceConsumer{c: c, group: o.Group}
	tps, err := c.PartitionsFor(ctx, o.Topic)
	if err == nil {
		err = c.Assign(tps)
	}
	if err == nil && o.Group != "" {
		// Where each partition starts (the group's committed offset, or the log's start), so
		// that the commit leaves alone the partitions the run read nothing from. The lookup
		// is the one the first Poll would make.
		sc.tps, sc.start = tps, make([]int64, len(tps))
		for i, tp := range tps {
			if sc.start[i], err = c.Position(ctx, tp); err != nil {
				err = fmt.Errorf("bench: position of %s in group %s: %w", tp, o.Group, err)
				break
			}
		}
	}
	if err != nil {
		c.Close(context.Background())
		return nil, err
	}
	return sc, nil
}

// sluiceConsumer is the Sluice driver's Consumer. Owned by the harness's goroutine that polls
// it.
type sluiceConsumer struct {
	c   *client.Consumer
	out []Message
	// recs are the last Poll's records, valid until the next Poll or Close (ReuseRecordBuffers):
	// Rewind finds the partitions and offsets of the records it gives back in them.
	recs []client.Record

	// With a group: the assigned partitions, the position each started at, and the first
	// offset given back (Rewind) of each partition of the last Poll that had records given
	// back, nil if none.
	group  string
	tps    []client.TopicPartition
	start  []int64
	rewind map[client.TopicPartition]int64
}

func (c *sluiceConsumer) Poll(ctx context.Context) ([]Message, error) {
	recs, err := c.c.Poll(ctx)
	if err != nil {
		return nil, err
	}
	c.recs = recs
	c.out = c.out[:0]
	for i := range recs {
		c.out = append(c.out, Message{Value: recs[i].Value, Timestamp: recs[i].Timestamp.UnixMilli()})
	}
	return c.out, nil
}

var _ Rewinder = (*sluiceConsumer)(nil)

// Rewind implements Rewinder: the records of the last Poll from n on are not committed. Within
// a partition Poll returns records in offset order, so the first one given back is where the
// partition's next run starts: one past the last record counted, or, if the run counted none
// of the partition's records in this Poll, where the Poll began it (after the records counted
// in earlier Polls and any control records or compaction gaps after them).
func (c *sluiceConsumer) Rewind(n int) {
	if c.group == "" || n >= len(c.recs) {
		return
	}
	c.rewind = map[client.TopicPartition]int64{}
	for i := range c.recs[n:] {
		r := &c.recs[n+i]
		tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if _, ok := c.rewind[tp]; !ok {
			c.rewind[tp] = r.Offset
		}
	}
}

// commit commits, for each assigned partition, the position after the records the run
// counted (Rewind), or after every record Poll returned, and nothing for a partition whose
// position has not moved: its group offset (or, with none, its absence) stays as it was.
func (c *sluiceConsumer) commit(ctx context.Context) error {
	offsets := map[client.TopicPartition]int64{}
	var errs []error
	for i, tp := range c.tps {
		pos, ok := c.rewind[tp]
		if !ok {
			var err error
			if pos, err = c.c.Position(ctx, tp); err != nil {
				errs = append(errs, fmt.Errorf("position of %s: %w", tp, err))
				continue
			}
		}
		if pos != c.start[i] {
			offsets[tp] = pos
		}
	}
	if len(offsets) > 0 {
		if err := c.c.CommitOffsets(ctx, offsets); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: commit for group %s: %w", c.group, err)
	}
	return nil
}

// FileReadBytes implements FileReadCounter.
func (c *sluiceConsumer) FileReadBytes() int64 { return c.c.Stats().FileReadBytes }

// Close implements Consumer; in a group, it commits first (commit).
func (c *sluiceConsumer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if c.group != "" {
		err = c.commit(ctx)
	}
	return errors.Join(err, c.c.Close(ctx))
}

// Close implements Driver.
func (d *SluiceDriver) Close() error { return d.admin.Close() }

// KafkaFetchMaxBytes is Kafka's default fetch.max.bytes, which drivers keep unless a larger
// fetch size (ConsumerOptions.FetchBytes) needs more.
const KafkaFetchMaxBytes = 50 << 20

// Embedded is an in-process broker on a temporary data directory, listening on a loopback
// TCP port and a unix socket.
type Embedded struct {
	b   *broker.Broker
	dir string
}

// StartEmbedded opens a broker in a new temporary directory (under dir, or the system's
// temporary directory if dir is empty), with the defaults changed by configure, if any (the
// data directory, the listeners and the logger stay the harness's). Close stops it and
// removes the directory.
func StartEmbedded(dir string, logger *slog.Logger, configure ...func(*broker.Config) error) (*Embedded, error) {
	cfg := broker.DefaultConfig()
	for _, f := range configure {
		if err := f(&cfg); err != nil {
			return nil, fmt.Errorf("bench: embedded broker: %w", err)
		}
	}
	tmp, err := os.MkdirTemp(dir, "sluice-bench-")
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.DataDir, cfg.Listen, cfg.UnixPath, cfg.Logger = tmp, "127.0.0.1:0", "", logger
	b, err := broker.Open(cfg)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("bench: embedded broker: %w", err)
	}
	return &Embedded{b: b, dir: tmp}, nil
}

// Dir is the broker's data directory.
func (e *Embedded) Dir() string { return e.dir }

// Addr is the address clients use over transport (TransportTCP or TransportUnix).
func (e *Embedded) Addr(transport string) (string, error) {
	switch transport {
	case TransportTCP, "":
		return e.b.Addr().String(), nil
	case TransportUnix:
		if e.b.UnixAddr() == nil {
			return "", errors.New("bench: embedded broker has no unix socket")
		}
		return "unix://" + e.b.UnixAddr().String(), nil
	}
	return "", fmt.Errorf("bench: unknown transport %q (want tcp or unix)", transport)
}

// Close stops the broker and removes its data directory.
func (e *Embedded) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := e.b.Close(ctx)
	return errors.Join(err, os.RemoveAll(e.dir))
}

// EmbeddedSluice starts an embedded broker (StartEmbedded, with configure) and returns a driver
// for it over transport, named "sluice-<transport>"; closing the driver stops the broker and
// removes its data.
func EmbeddedSluice(ctx context.Context, dir, transport string, logger *slog.Logger, configure ...func(*broker.Config) error) (Driver, error) {
	e, err := StartEmbedded(dir, nil, configure...)
	if err != nil {
		return nil, err
	}
	addr, err := e.Addr(transport)
	if err == nil {
		var d *SluiceDriver
		if d, err = NewSluiceDriver(ctx, "sluice-"+transport, addr, logger); err == nil {
			return &ownedDriver{Driver: d, close: e.Close}, nil
		}
	}
	return nil, errors.Join(err, e.Close())
}

// ownedDriver is a driver that owns something to close after it (an embedded broker).
type ownedDriver struct {
	Driver
	close func() error
}

func (d *ownedDriver) Close() error { return errors.Join(d.Driver.Close(), d.close()) }

// Unwrap returns the wrapped driver, whose optional interfaces (TopicDeleter, ...) the wrapper
// does not have (driverAs).
func (d *ownedDriver) Unwrap() Driver { return d.Driver }

// WithClose returns d with close run after d.Close: for a driver whose system (an in-process
// peer, its data directory) must be cleaned up with it.
func WithClose(d Driver, close func() error) Driver { return &ownedDriver{Driver: d, close: close} }

// BrokerProperties returns a configure function for StartEmbedded that applies a Kafka-style
// properties file, as `sluice serve --config` does.
func BrokerProperties(file string) func(*broker.Config) error {
	return func(cfg *broker.Config) error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := broker.ParseProperties(f, cfg); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		return nil
	}
}
