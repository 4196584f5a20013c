package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

type produceOptions struct {
	broker       string
	topic        string
	partition    int32
	keySeparator string
	acks         string
	compression  string
	lingerMs     int
	batchSize    int
	maxBlockMs   int
	idempotence  bool // --enable-idempotence, a property only when given
	file         string
	headers      []string // --header k=v
	lineProps    []string // --property: how lines are read (Kafka's console producer's)
	clientProps  []string // --producer-property

	// Resolved from the above in RunE.
	reader lineFormat
	props  propertySet // producer properties, flags' included
}

// produceFlagProperties maps the producer properties that have flags of their own to them.
var produceFlagProperties = map[string]string{
	"acks": "acks", "compression.type": "compression", "linger.ms": "linger-ms",
	"batch.size": "batch-size", "max.block.ms": "max-block-ms", "bootstrap.servers": "bootstrap-server",
	"enable.idempotence": "enable-idempotence",
}

// produceMaxErrorLines bounds the per-record errors printed; the summary counts them all.
const produceMaxErrorLines = 10

func produceCmd() *cobra.Command {
	var o produceOptions
	cmd := &cobra.Command{
		Use:   "produce --topic T",
		Short: "Send lines from stdin (or --file) as records (as kafka-console-producer)",
		Long: `Send each line of stdin (or of --file) as one record, without its line ending.

With --key-separator, the text before the first separator is the record's key and the rest its
value; a line without the separator is an error (and is not sent). Without it records have no
key and go to partitions by sticky partitioning, as with Kafka's default partitioner.

A topic that does not exist (it is waited for up to --max-block-ms) or whose name is not valid
fails the first line and stops there: the later lines are not read, and the exit status is
non-zero.

At the end (end of input, or Ctrl-C / SIGTERM, which stop the reading: later lines are not
sent) the producer is flushed and a summary (records and bytes delivered: acknowledged, or
with --acks 0 written to the socket; errors) is printed
on stderr. The exit status is non-zero if any record failed.`,
		Args:         noArgs("the topic goes in --topic, the input on stdin or in --file"),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := o.resolve(cmd.Flags()); err != nil {
				return err
			}
			in := cmd.InOrStdin()
			if o.file != "" {
				f, err := os.Open(o.file)
				if err != nil {
					return err
				}
				defer f.Close()
				// Refused before connecting: a directory opens, and only its first read fails.
				if fi, err := f.Stat(); err == nil && fi.IsDir() {
					return fmt.Errorf("--file %s: is a directory", o.file)
				}
				in = f
			}
			return runProduce(ctx, stop, o, in, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	addBootstrapFlags(f, &o.broker)
	f.StringVarP(&o.topic, "topic", "t", "", "topic to produce to (required)")
	f.Int32Var(&o.partition, "partition", -1, "send every record to this partition (-1: the partitioner chooses, by key, else sticky)")
	f.StringVar(&o.keySeparator, "key-separator", "", "split each line into key and value at the first occurrence of this string (default: no key); as --property parse.key=true --property key.separator=S")
	f.StringArrayVar(&o.headers, "header", nil, "add this header `key=value` to every record (repeatable)")
	f.StringArrayVar(&o.lineProps, "property", nil, "how lines are read, `key=value` as kafka-console-producer's --property: "+strings.Join(lineFormatProperties, ", ")+" (repeatable)")
	f.StringArrayVar(&o.clientProps, "producer-property", nil, "a producer property `key=value`, Kafka's name (repeatable): "+propertiesHelp(producerProperties))
	f.StringVar(&o.acks, "acks", "all", "acks: all (-1), 1 or 0")
	f.StringVar(&o.compression, "compression", "none", "compression.type: none, gzip, snappy, lz4 or zstd")
	f.IntVar(&o.lingerMs, "linger-ms", 5, "linger.ms: how long a batch waits for more records")
	f.IntVar(&o.batchSize, "batch-size", 16384, "batch.size in bytes")
	f.IntVar(&o.maxBlockMs, "max-block-ms", 60000, "max.block.ms: how long to wait for metadata or buffer space")
	f.BoolVar(&o.idempotence, "enable-idempotence", true, "enable.idempotence: no duplicates and each partition's order across retries (unset: on unless --acks is not all; false: retries may duplicate)")
	f.StringVar(&o.file, "file", "", "read lines from this file instead of stdin")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// produceStats counts outcomes; callbacks update it from the producer's goroutines.
type produceStats struct {
	records, bytes, errors atomic.Int64
	mu                     sync.Mutex
	printed                int
	topicErr               error // the first failure that every later line would repeat; guarded by mu
	stderr                 io.Writer
}

// failTopic records err, a failure of the topic itself, if it is the first.
func (s *produceStats) failTopic(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.topicErr == nil {
		s.topicErr = err
	}
}

// topicFailed returns the failure recorded by failTopic, if any.
func (s *produceStats) topicFailed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.topicErr
}

// topicFailure reports whether err says that the topic cannot be produced to at all: it does
// not exist (Send waited max.block.ms for it) or its name is one no topic can have. Every
// later line would fail the same way, each after the same wait.
func topicFailure(err error) bool {
	return errors.Is(err, client.ErrUnknownTopic) || errors.Is(err, wire.ErrInvalidTopicException)
}

func (s *produceStats) fail(format string, args ...any) {
	s.errors.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.printed < produceMaxErrorLines {
		s.printed++
		fmt.Fprintf(s.stderr, "sluice produce: "+format+"\n", args...)
	}
}

// runProduce sends the lines of in. stop ends signal handling, so that a second Ctrl-C kills
// the process while the first one's flush is under way.
func runProduce(ctx context.Context, stop func(), o produceOptions, in io.Reader, stderr io.Writer) error {
	cfg := client.ProducerConfig{Config: client.Config{ClientID: "sluice-produce",
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}}
	if err := producerProperties.apply("--producer-property", o.props, &cfg); err != nil {
		return err
	}
	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(setupCtx, cfg)
	if err != nil {
		return err
	}
	stats := &produceStats{stderr: stderr}
	gate := &sendGate{}
	read := make(chan error, 1)
	go func() { read <- produceLines(ctx, p, o, in, stats, gate) }()
	var readErr error
	select {
	case readErr = <-read:
	case <-ctx.Done():
		stop()
		fmt.Fprintln(stderr, "interrupted: delivering the records already read (interrupt again to quit at once)")
		// Stop the reader before Close, which fails every later Send as "producer closed".
		gate.close()
		readErr = fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	// Close flushes: every record read so far is delivered or has failed when it returns.
	if cerr := p.Close(context.Background()); cerr != nil && readErr == nil {
		readErr = cerr
	}
	n := stats.records.Load()
	fmt.Fprintf(stderr, "%d records, %d bytes, %d errors\n", n, stats.bytes.Load(), stats.errors.Load())
	if readErr != nil {
		return readErr
	}
	if e := stats.errors.Load(); e > 0 {
		return fmt.Errorf("%d of %d records failed", e, n+e)
	}
	return nil
}

// sendGate stands between the input and the producer: the reader enters it for each line, and
// close, on an interrupt, waits for the line under way and keeps every later one out. So no
// Send meets Close (it would fail as "producer closed" and count as an error) and nothing is
// counted after the summary, while a reader blocked on its input (a terminal) is not waited
// for: once its read returns, it finds the gate closed and stops.
type sendGate struct {
	mu     sync.Mutex
	closed bool
}

// enter reports whether the next line may go to the producer; if so, leave must follow.
func (g *sendGate) enter() bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	return true
}

func (g *sendGate) leave() { g.mu.Unlock() }

// close waits for the line under way, if any (a Send blocked on buffer space or metadata
// returns once ctx ends), and refuses the next ones.
func (g *sendGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// produceLines sends each line of in as a record, until the end of in or until gate closes.
func produceLines(ctx context.Context, p *client.Producer, o produceOptions, in io.Reader, stats *produceStats, gate *sendGate) error {
	r := bufio.NewReaderSize(in, 64<<10)
	var line []byte
	for lineNo := 1; ; lineNo++ {
		var err error
		line, err = produceReadLine(r, line[:0])
		if len(line) > 0 { // not the empty remainder after a final newline
			if !gate.enter() {
				return nil // interrupted: runProduce reports it
			}
			produceLine(ctx, p, o, trimEOL(line), lineNo, stats)
			gate.leave()
			if terr := stats.topicFailed(); terr != nil {
				// Without this, each line waits max.block.ms (a minute) for the topic
				// in its turn: a long input would take hours to fail line by line.
				return fmt.Errorf("%w; stopped there: the lines after it were not sent", terr)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
	}
}

// produceLine sends one line. Send copies the record, so the caller reuses line at once.
func produceLine(ctx context.Context, p *client.Producer, o produceOptions, line []byte, lineNo int, stats *produceStats) {
	rec, err := o.reader.record(line)
	if err != nil {
		stats.fail("line %d: %v", lineNo, err)
		return
	}
	rec.Topic, rec.Partition, rec.PartitionSet = o.topic, o.partition, o.partition != client.PartitionAny
	size := int64(len(rec.Key) + len(rec.Value))

	p.Send(ctx, &rec, func(_ client.RecordMetadata, err error) {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return // the interrupt ended Send's wait for buffer space or metadata: not sent, not failed
		}
		if err != nil && topicFailure(err) {
			// Counted, and printed once as the command's error, which ends the input.
			stats.errors.Add(1)
			stats.failTopic(fmt.Errorf("line %d: %w", lineNo, err))
			return
		}
		if err != nil {
			stats.fail("line %d: %v", lineNo, err)
			return
		}
		stats.records.Add(1)
		stats.bytes.Add(size)
	})
}

// produceReadLine appends the next line of r (with its line ending) to buf, whatever its length.
func produceReadLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}

func trimEOL(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r"))
}
