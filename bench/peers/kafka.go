// Package peers implements bench.Driver for the systems Sluice is compared against: any
// Kafka-API broker through franz-go (kgo), franz-go's in-process fake cluster (kfake), and NATS
// JetStream through nats.go, either external or an in-process nats-server.
//
// It is imported only by the benchmark command (cmd/sluice/bench_peers.go), never by the broker
// or the client, so none of these dependencies reach the broker's import graph.
package peers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/bench"
)

// KafkaDriver drives any Kafka-API broker with franz-go. Each producer and consumer gets its own
// kgo client, as separate Kafka producer/consumer instances would.
type KafkaDriver struct {
	name    string
	seeds   []string
	admin   *kgo.Client    // shared client for topic administration
	cluster *kfake.Cluster // non-nil when the driver started kfake in-process
}

var _ bench.Driver = (*KafkaDriver)(nil)

// NewKafka returns a driver for the Kafka-API broker(s) at addr (comma-separated host:port list).
// It checks that the brokers answer before returning.
func NewKafka(ctx context.Context, addr string) (*KafkaDriver, error) {
	var seeds []string
	for _, s := range strings.Split(addr, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil, errors.New("kafka driver: empty broker address")
	}
	return newKafka(ctx, "kafka", seeds, nil)
}

// StartKfake starts franz-go's fake Kafka cluster in-process (one broker, loopback, random port,
// in memory) and returns a driver for it; Close stops the cluster.
func StartKfake(ctx context.Context) (*KafkaDriver, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, fmt.Errorf("kfake: %w", err)
	}
	d, err := newKafka(ctx, "kfake", c.ListenAddrs(), c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return d, nil
}

func newKafka(ctx context.Context, name string, seeds []string, c *kfake.Cluster) (*KafkaDriver, error) {
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := admin.Ping(ctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("%s: ping %v: %w", name, seeds, err)
	}
	return &KafkaDriver{name: name, seeds: seeds, admin: admin, cluster: c}, nil
}

// Name implements bench.Driver.
func (d *KafkaDriver) Name() string { return d.name }

// Addrs returns the seed broker addresses (kfake's listeners when started in-process).
func (d *KafkaDriver) Addrs() []string { return append([]string(nil), d.seeds...) }

// CreateTopic creates topic with the broker's default replication factor. A topic that already
// exists is not an error (its partition count is left as it is).
func (d *KafkaDriver) CreateTopic(ctx context.Context, topic string, partitions int) error {
	if partitions <= 0 {
		partitions = 1
	}
	resp, err := kadm.NewClient(d.admin).CreateTopic(ctx, int32(partitions), -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("%s: create topic %q: %w", d.name, topic, err)
	}
	return nil
}

// DeleteTopic implements bench.TopicDeleter.
func (d *KafkaDriver) DeleteTopic(ctx context.Context, topic string) error {
	resp, err := kadm.NewClient(d.admin).DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("%s: delete topic %q: %w", d.name, topic, err)
	}
	return nil
}

// kafkaProducerOpts maps the harness's producer options to kgo options.
func kafkaProducerOpts(opts bench.ProducerOptions) ([]kgo.Opt, error) {
	var o []kgo.Opt
	switch opts.Acks {
	case -1:
		o = append(o, kgo.RequiredAcks(kgo.AllISRAcks()))
	case 1:
		// kgo's idempotent producer requires acks=all.
		o = append(o, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case 0:
		o = append(o, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, fmt.Errorf("kafka driver: acks %d: want -1, 0 or 1", opts.Acks)
	}
	var codec kgo.CompressionCodec
	switch strings.ToLower(opts.Compression) {
	case "", "none":
		codec = kgo.NoCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	default:
		return nil, fmt.Errorf("kafka driver: unknown compression %q", opts.Compression)
	}
	o = append(o, kgo.ProducerBatchCompression(codec))
	if opts.BatchSize > 0 {
		o = append(o, kgo.ProducerBatchMaxBytes(int32(min(opts.BatchSize, 1<<30))))
	}
	if opts.LingerMs < 0 {
		return nil, fmt.Errorf("kafka driver: negative linger %d ms", opts.LingerMs)
	}
	// linger.ms=0 is Kafka's meaning of 0 (send as soon as possible), not kgo's 10 ms default.
	o = append(o, kgo.ProducerLinger(time.Duration(opts.LingerMs)*time.Millisecond))
	return o, nil
}

// NewProducer implements bench.Driver with a kgo client configured from opts.
func (d *KafkaDriver) NewProducer(ctx context.Context, opts bench.ProducerOptions) (bench.Producer, error) {
	if opts.Topic == "" {
		return nil, errors.New("kafka driver: producer without topic")
	}
	po, err := kafkaProducerOpts(opts)
	if err != nil {
		return nil, err
	}
	counts := new(produceCounts)
	po = append(po, kgo.SeedBrokers(d.seeds...), kgo.DefaultProduceTopic(opts.Topic), kgo.WithHooks(counts))
	cl, err := kgo.NewClient(po...)
	if err != nil {
		return nil, fmt.Errorf("%s: producer: %w", d.name, err)
	}
	ack := opts.Ack
	return &kafkaProducer{cl: cl, topic: opts.Topic, counts: counts, promise: func(r *kgo.Record, err error) {
		sr := (*sentRecord)(unsafe.Pointer(r)) // Send produced it; see sentRecord
		ack(sr.sent, len(r.Value), err)
	}}, nil
}

type kafkaProducer struct {
	cl      *kgo.Client
	topic   string
	counts  *produceCounts
	promise func(*kgo.Record, error) // one for every record; see sentRecord
}

// produceCounts counts, through kgo's hooks, the Produce requests written and the batches
// the brokers acknowledged (kgo reports batches when their response arrives).
type produceCounts struct{ requests, batches atomic.Int64 }

func (c *produceCounts) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 0 && err == nil { // 0: Produce
		c.requests.Add(1)
	}
}

func (c *produceCounts) OnProduceBatchWritten(kgo.BrokerMetadata, string, int32, kgo.ProduceBatchMetrics) {
	c.batches.Add(1)
}

var _ bench.RequestCounter = (*kafkaProducer)(nil)

// SentRequests implements bench.RequestCounter.
func (p *kafkaProducer) SentRequests() (requests, batches int64) {
	return p.counts.requests.Load(), p.counts.batches.Load()
}

// sentRecord is a kgo record with its send time. kgo hands the promise the very *kgo.Record
// given to Produce, which is the first field of a sentRecord, so the promise can reach the
// send time without a closure per record. (The record's own Timestamp will not do: kgo
// truncates it to the millisecond.)
type sentRecord struct {
	kgo.Record
	sent time.Time
}

// Send copies key and value (the caller may reuse them, as with the Sluice client) and produces
// them asynchronously.
func (p *kafkaProducer) Send(ctx context.Context, key, value []byte, sent time.Time) {
	buf := make([]byte, len(key)+len(value))
	copy(buf, key)
	copy(buf[len(key):], value)
	sr := &sentRecord{Record: kgo.Record{Topic: p.topic, Value: buf[len(key):], Timestamp: sent}, sent: sent}
	if key != nil {
		sr.Key = buf[:len(key):len(key)]
	}
	p.cl.Produce(ctx, &sr.Record, p.promise)
}

func (p *kafkaProducer) Flush(ctx context.Context) error { return p.cl.Flush(ctx) }

func (p *kafkaProducer) Close() error {
	p.cl.Close() // fails records still buffered, after which their promises have run
	return nil
}

// NewConsumer implements bench.Driver: a kgo client consuming every partition of the topic from
// the start; with opts.Group, as a member of that consumer group, which commits as it closes
// what the run counted (bench.Rewinder; kgo's autocommit would commit every record polled).
func (d *KafkaDriver) NewConsumer(ctx context.Context, opts bench.ConsumerOptions) (bench.Consumer, error) {
	if opts.Topic == "" {
		return nil, errors.New("kafka driver: consumer without topic")
	}
	co := []kgo.Opt{
		kgo.SeedBrokers(d.seeds...),
		kgo.ConsumeTopics(opts.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	if opts.Group != "" {
		co = append(co, kgo.ConsumerGroup(opts.Group), kgo.AutoCommitMarks())
	}
	if opts.FetchBytes > 0 {
		// kgo refuses a fetch.max.bytes above what it reads from a broker at once (100 MiB by
		// default), so that limit grows with it, with room for a first batch past the limit.
		fetchMax := min(max(opts.FetchBytes, bench.KafkaFetchMaxBytes), 1<<30)
		co = append(co, kgo.FetchMaxPartitionBytes(int32(min(opts.FetchBytes, math.MaxInt32))),
			kgo.FetchMaxBytes(int32(fetchMax)),
			kgo.BrokerMaxReadBytes(int32(min(max(fetchMax+fetchMax/8+64<<10, 100<<20), math.MaxInt32))))
	}
	cl, err := kgo.NewClient(co...)
	if err != nil {
		return nil, fmt.Errorf("%s: consumer: %w", d.name, err)
	}
	return &kafkaConsumer{cl: cl, name: d.name, group: opts.Group}, nil
}

// kafkaConsumer is the Kafka driver's bench.Consumer. Owned by the goroutine that polls it.
type kafkaConsumer struct {
	cl   *kgo.Client
	name string
	msgs []bench.Message
	// With a group: the last Poll's fetches (for Rewind), and the offsets Rewind gave back
	// from, by topic and partition (nil if none).
	group  string
	last   kgo.Fetches
	rewind map[string]map[int32]kgo.EpochOffset
}

var _ bench.Rewinder = (*kafkaConsumer)(nil)

// Rewind implements bench.Rewinder: the records of the last Poll from n on are not committed.
// The first given back of each partition is where its next run starts.
func (c *kafkaConsumer) Rewind(n int) {
	if c.group == "" {
		return
	}
	i := 0
	c.last.EachRecord(func(r *kgo.Record) { // Poll's order
		if i++; i <= n {
			return
		}
		if c.rewind == nil {
			c.rewind = map[string]map[int32]kgo.EpochOffset{}
		}
		if c.rewind[r.Topic] == nil {
			c.rewind[r.Topic] = map[int32]kgo.EpochOffset{}
		}
		if _, ok := c.rewind[r.Topic][r.Partition]; !ok {
			c.rewind[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
		}
	})
}

// commit commits what the Polls returned less what Rewind gave back. A partition given back
// from where its group offset already was is left alone. The offsets go through kgo's marks
// (AutoCommitMarks: the periodic autocommit commits only marked offsets, and none are until
// now), which commit exactly what is marked.
func (c *kafkaConsumer) commit(ctx context.Context) error {
	offsets := c.cl.UncommittedOffsets() // the head of every partition polled
	committed := c.cl.CommittedOffsets()
	for t, ps := range c.rewind {
		for p, eo := range ps {
			if cur, ok := committed[t][p]; ok && cur.Offset == eo.Offset {
				delete(offsets[t], p)
				continue
			}
			if offsets[t] == nil {
				offsets[t] = map[int32]kgo.EpochOffset{}
			}
			offsets[t][p] = eo
		}
	}
	c.cl.MarkCommitOffsets(offsets)
	if err := c.cl.CommitMarkedOffsets(ctx); err != nil {
		return fmt.Errorf("%s: commit for group %s: %w", c.name, c.group, err)
	}
	return nil
}

// Poll returns the records of one PollFetches. Retriable partition errors (a topic still being
// created, a leader moving) are left to kgo, which retries them.
func (c *kafkaConsumer) Poll(ctx context.Context) ([]bench.Message, error) {
	for {
		fs := c.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if fs.IsClientClosed() {
			return nil, fmt.Errorf("%s: consumer closed", c.name)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil && !kerr.IsRetriable(err) && !errors.Is(err, context.Canceled) &&
				!errors.Is(err, context.DeadlineExceeded) {
				ferr = fmt.Errorf("%s: fetch %s[%d]: %w", c.name, t, p, err)
			}
		})
		c.msgs = c.msgs[:0]
		fs.EachRecord(func(r *kgo.Record) {
			c.msgs = append(c.msgs, bench.Message{Value: r.Value, Timestamp: r.Timestamp.UnixMilli()})
		})
		if len(c.msgs) > 0 {
			c.last = fs
			return c.msgs, nil
		}
		if ferr != nil {
			return nil, ferr
		}
	}
}

// Close implements bench.Consumer; in a group it commits first (commit), then leaves it.
func (c *kafkaConsumer) Close() error {
	var err error
	if c.group != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = c.commit(ctx)
		cancel()
	}
	c.cl.Close()
	return err
}

// Close implements bench.Driver, stopping the kfake cluster when this driver started it.
func (d *KafkaDriver) Close() error {
	d.admin.Close()
	if d.cluster != nil {
		d.cluster.Close()
	}
	return nil
}
