package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/bench"
)

const (
	nRecords   = 1000
	recordSize = 100
)

func record(i int) []byte {
	v := bytes.Repeat([]byte{'x'}, recordSize)
	copy(v, fmt.Sprintf("rec-%06d-", i))
	return v
}

// roundTrip produces nRecords through the bench.Producer interface, flushes, and consumes them
// all back through bench.Consumer (with copts' group and fetch size), checking count, order
// (one partition) and content.
func roundTrip(t *testing.T, d bench.Driver, popts bench.ProducerOptions, copts bench.ConsumerOptions) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.CreateTopic(ctx, popts.Topic, 1); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	// Every record is sent at its own instant; the acks must hand back exactly those instants
	// (drivers carry them through the client, not through a closure per record).
	base := time.Now()
	var acked atomic.Int64
	var errMu sync.Mutex
	var firstErr error
	seen := make([]bool, nRecords)
	popts.Ack = func(sent time.Time, n int, err error) {
		errMu.Lock()
		defer errMu.Unlock()
		i := int(sent.Sub(base) / time.Microsecond)
		switch {
		case err != nil:
			if firstErr == nil {
				firstErr = err
			}
		case n != recordSize:
			firstErr = fmt.Errorf("ack with n = %d, want %d", n, recordSize)
		case i < 0 || i >= nRecords || !sent.Equal(base.Add(time.Duration(i)*time.Microsecond)) || seen[i]:
			firstErr = fmt.Errorf("ack with sent = base%+v, not a send time or acknowledged twice", sent.Sub(base))
		default:
			seen[i] = true
		}
		acked.Add(1)
	}
	p, err := d.NewProducer(ctx, popts)
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	buf := make([]byte, recordSize) // reused on purpose: Send must not retain it
	for i := range nRecords {
		copy(buf, record(i))
		p.Send(ctx, nil, buf, base.Add(time.Duration(i)*time.Microsecond))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if n := acked.Load(); n != nRecords {
		t.Fatalf("after Flush %d of %d sends completed", n, nRecords)
	}
	errMu.Lock()
	if firstErr != nil {
		t.Fatalf("send error: %v", firstErr)
	}
	errMu.Unlock()
	if err := p.Close(); err != nil {
		t.Fatalf("producer Close: %v", err)
	}
	if rc, ok := p.(bench.RequestCounter); ok {
		// Every record went in some batch and request; a batch holds at most BatchSize bytes
		// (kgo's and Sluice's producers send as soon as they can, so batches are smaller).
		reqs, batches := rc.SentRequests()
		t.Logf("%d produce requests, %d batches", reqs, batches)
		if reqs < 1 || batches < 1 || batches > nRecords {
			t.Fatalf("%d produce requests, %d batches for %d records", reqs, batches, nRecords)
		}
		if popts.BatchSize > 0 && batches < int64(nRecords*recordSize/popts.BatchSize) {
			t.Fatalf("%d batches for %d records of %d bytes in batches of at most %d", batches, nRecords, recordSize, popts.BatchSize)
		}
	}

	copts.Topic = popts.Topic
	c, err := d.NewConsumer(ctx, copts)
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	defer c.Close()
	now := time.Now().UnixMilli()
	got := 0
	for got < nRecords {
		msgs, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("Poll after %d records: %v", got, err)
		}
		for _, m := range msgs {
			if got >= nRecords {
				t.Fatalf("more than %d records", nRecords)
			}
			if want := record(got); !bytes.Equal(m.Value, want) {
				t.Fatalf("record %d = %q, want %q", got, m.Value, want)
			}
			if m.Timestamp <= 0 || m.Timestamp > now+1000 || m.Timestamp < now-60_000 {
				t.Fatalf("record %d timestamp %d, now %d", got, m.Timestamp, now)
			}
			got++
		}
	}
	// Nothing more arrives.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if msgs, err := c.Poll(short); err == nil {
		t.Fatalf("extra %d records after %d", len(msgs), nRecords)
	} else if short.Err() == nil {
		t.Fatalf("Poll: %v, want a context error", err)
	}
}

func TestKfakeRoundTrip(t *testing.T) {
	ctx, d := startKfake(t)
	if d.Name() != "kfake" {
		t.Fatalf("Name = %q", d.Name())
	}
	for _, tc := range []struct {
		opts  bench.ProducerOptions
		group string
		fetch int
	}{
		{opts: bench.ProducerOptions{Acks: 1, Compression: "none", LingerMs: 0}},
		{opts: bench.ProducerOptions{Acks: -1, Compression: "lz4", BatchSize: 16 << 10, LingerMs: 5}, group: "g1"},
		{opts: bench.ProducerOptions{Acks: 0, Compression: "snappy", BatchSize: 1 << 20, LingerMs: 1}},
		{opts: bench.ProducerOptions{Acks: 1, Compression: "gzip", BatchSize: 4 << 10, LingerMs: 1}, fetch: 1 << 10},
		// Past kgo's default limit on one read from a broker (100 MiB), which must grow with it.
		{opts: bench.ProducerOptions{Acks: 1, Compression: "zstd", BatchSize: 64 << 10, LingerMs: 1}, fetch: 128 << 20},
	} {
		tc.opts.Topic = fmt.Sprintf("t-acks%d-%s", tc.opts.Acks, tc.opts.Compression)
		t.Run(tc.opts.Topic, func(t *testing.T) {
			roundTrip(t, d, tc.opts, bench.ConsumerOptions{Group: tc.group, FetchBytes: tc.fetch})
		})
	}
	// Creating an existing topic is not an error.
	if err := d.CreateTopic(ctx, "t-acks1-none", 1); err != nil {
		t.Fatalf("CreateTopic again: %v", err)
	}
	checkDelete(t, d, "t-acks1-none")
}

// checkDelete deletes topic through bench.TopicDeleter (as the harness deletes its probes'
// topics): the first delete succeeds and a second one fails, since the topic is gone.
func checkDelete(t *testing.T, d bench.Driver, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	td, ok := d.(bench.TopicDeleter)
	if !ok {
		t.Fatalf("%s cannot delete topics", d.Name())
	}
	if err := td.DeleteTopic(ctx, topic); err != nil {
		t.Fatalf("DeleteTopic(%q): %v", topic, err)
	}
	if err := td.DeleteTopic(ctx, topic); err == nil {
		t.Errorf("DeleteTopic(%q) a second time: no error, so the first did not delete it", topic)
	}
}

func TestJetStreamRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ctx, d := startJetStream(t, dir)
	if d.Name() != "jetstream" {
		t.Fatalf("Name = %q", d.Name())
	}
	for _, tc := range []struct {
		opts  bench.ProducerOptions
		group string
		fetch int
	}{
		{opts: bench.ProducerOptions{Topic: "js.acks1", Acks: 1, Compression: "none"}},
		{opts: bench.ProducerOptions{Topic: "js-acksall", Acks: -1, Compression: "zstd"}, group: "g.1"},
		{opts: bench.ProducerOptions{Topic: "js-acks0", Acks: 0}},
	} {
		t.Run(StreamName(tc.opts.Topic), func(t *testing.T) {
			roundTrip(t, d, tc.opts, bench.ConsumerOptions{Group: tc.group, FetchBytes: tc.fetch})
		})
	}
	if _, err := d.NewConsumer(ctx, bench.ConsumerOptions{Topic: "js.acks1", FetchBytes: 1 << 20}); err == nil {
		t.Error("a JetStream consumer with a fetch size: want an error")
	}
	checkDelete(t, d, "js.acks1")
}

// TestExternalDrivers connects NewKafka and NewJetStream to in-process peers, as --driver does.
func TestExternalDrivers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kf, err := StartKfake(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	k, err := NewKafka(ctx, kf.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if k.Name() != "kafka" {
		t.Fatalf("Name = %q", k.Name())
	}
	if err := k.CreateTopic(ctx, "ext", 3); err != nil {
		t.Fatal(err)
	}

	js, err := StartJetStream(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	n, err := NewJetStream(ctx, js.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.Name() != "nats" {
		t.Fatalf("Name = %q", n.Name())
	}
	if err := n.CreateTopic(ctx, "ext", 1); err != nil {
		t.Fatal(err)
	}

	if _, err := NewKafka(ctx, " , "); err == nil {
		t.Fatal("NewKafka with no address: no error")
	}
}

func TestKafkaProducerOptsErrors(t *testing.T) {
	for _, o := range []bench.ProducerOptions{
		{Acks: 2},
		{Acks: 1, Compression: "brotli"},
		{Acks: 1, LingerMs: -1},
	} {
		if _, err := kafkaProducerOpts(o); err == nil {
			t.Errorf("kafkaProducerOpts(%+v): no error", o)
		}
	}
	if _, err := kafkaProducerOpts(bench.ProducerOptions{Acks: -1, Compression: "ZSTD"}); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

func TestStreamName(t *testing.T) {
	if got := StreamName("a.b*c>d/e f"); got != "a_b_c_d_e_f" {
		t.Fatalf("StreamName = %q", got)
	}
}

// TestKfakeGroupCommitsOnlyTheRecordsCounted: a consume run of 300 of 1000 records in a group
// commits the 300 it counted, not the whole of its last Poll: the group's next consumer starts
// with record 300.
func TestKfakeGroupCommitsOnlyTheRecordsCounted(t *testing.T) {
	ctx, d := startKfake(t)
	if err := d.CreateTopic(ctx, "counted", 1); err != nil {
		t.Fatal(err)
	}
	p, err := d.NewProducer(ctx, bench.ProducerOptions{Topic: "counted", Acks: 1, Compression: "none", BatchSize: 16 << 10, LingerMs: 1,
		Ack: func(_ time.Time, _ int, err error) {
			if err != nil {
				t.Error(err)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nRecords {
		p.Send(ctx, nil, record(i), time.Now())
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := bench.Consume(ctx, d, bench.Config{Topic: "counted", Records: 300, Group: "gc", IdleTimeout: 10 * time.Second})
	if err != nil || r.Records != 300 {
		t.Fatalf("consume 300 in a group: %d records, %v", r.Records, err)
	}
	c, err := d.NewConsumer(ctx, bench.ConsumerOptions{Topic: "counted", Group: "gc"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pctx, cancelPoll := context.WithTimeout(ctx, 10*time.Second)
	defer cancelPoll()
	msgs, err := c.Poll(pctx)
	if err != nil {
		t.Fatalf("the group's next consumer: %v (nothing left after what the group committed?)", err)
	}
	if want := record(300); !bytes.Equal(msgs[0].Value, want) {
		t.Fatalf("the group's next consumer starts with %q, want %q", msgs[0].Value, want)
	}
}

// TestJetStreamRefusesGroupRecords: the JetStream driver acknowledges each Poll as it returns,
// so it cannot leave the end of a run's last Poll to the group's next run: a consume run of
// records in a group is refused rather than silently skipping records.
func TestJetStreamRefusesGroupRecords(t *testing.T) {
	ctx, d := startJetStream(t, t.TempDir())
	if err := d.CreateTopic(ctx, "js-grp", 1); err != nil {
		t.Fatal(err)
	}
	_, err := bench.Consume(ctx, d, bench.Config{Topic: "js-grp", Records: 10, Group: "g", IdleTimeout: time.Second})
	if !errors.Is(err, bench.ErrGroupRecords) {
		t.Fatalf("consume of records in a group: %v, want ErrGroupRecords", err)
	}
}

// startKfake starts an in-process kfake for the test, with a context that bounds the test's
// calls (60 s); both end with the test.
func startKfake(t *testing.T) (context.Context, *KafkaDriver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	d, err := StartKfake(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return ctx, d
}

// startJetStream starts an in-process nats-server with JetStream storing in dir, as startKfake.
func startJetStream(t *testing.T, dir string) (context.Context, *JetStreamDriver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	d, err := StartJetStream(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return ctx, d
}
