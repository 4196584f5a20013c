package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

type consumeOptions struct {
	broker        string
	topic         string
	group         string
	offset        string
	fromBeginning bool
	partition     int32
	maxMessages   int
	format        string
	timeout       time.Duration
	timeoutMs     int
	clientProps   []string // --consumer-property

	props propertySet // resolved in RunE: the consumer properties, --group's included
}

// resolve checks and combines the flags into o.timeout and o.props.
func (o *consumeOptions) resolve(fs *pflag.FlagSet) error {
	if fs.Changed("timeout-ms") {
		if fs.Changed("timeout") {
			return errors.New("--timeout and --timeout-ms both set the idle timeout: give one")
		}
		if o.timeoutMs < 0 {
			return fmt.Errorf("--timeout-ms %d cannot be negative", o.timeoutMs)
		}
		o.timeout = time.Duration(o.timeoutMs) * time.Millisecond
	}
	props, err := collectProperties("--consumer-property", o.clientProps, fs,
		map[string]string{"group.id": "group", "bootstrap.servers": "bootstrap-server"},
		map[string]string{"bootstrap.servers": o.broker, "client.id": "sluice-consume"})
	if err != nil {
		return err
	}
	if _, ok := props.values["auto.offset.reset"]; ok && (o.fromBeginning || o.offset != "") {
		return errors.New("--consumer-property auto.offset.reset and --from-beginning or --offset both say where to start: give one")
	}
	if g, ok := props.values["group.id"]; ok {
		o.group = g // the checks of runConsume apply to it as to --group
	}
	o.props = props
	return nil
}

func consumeCmd() *cobra.Command {
	var o consumeOptions
	cmd := &cobra.Command{
		Use:   "consume --topic T",
		Short: "Print a topic's records on stdout, one value per line (as kafka-console-consumer)",
		Long: `Print a topic's records on stdout.

By default each value goes on its own line ("null" for a null value), as kafka-console-consumer
prints them. --format takes a kcat-like format string instead, printed as is for each record:
  %s value   %k key   %t topic   %p partition   %o offset   %T timestamp (ms)
  %S value length (-1 null)   %K key length (-1 null)   %h headers (k=v,...)   %% a percent sign
  \n newline   \t tab   \r carriage return   \\ backslash

Where to start: --from-beginning (else the end, for records produced from now on), --offset
(earliest or latest for every consumed partition, or a number for the one --partition names),
or --group, which resumes from
the group's committed offsets (with --from-beginning for partitions the group has not
committed). With --group, the offsets of the printed records are committed periodically and on
exit, including Ctrl-C and SIGTERM.

A numeric --offset N needs --partition, as in kafka-console-consumer (offsets are a
partition's own). It fails, naming the offsets the partition holds, when the partition's log
starts after N or ends before it, or when retention deletes records before they are printed: it
does not jump to the log's end (kafka-console-consumer does, silently).

--group makes the process a member of the consumer group: the processes that run with the
same --group share the topic's partitions, each reading its own, and when one starts or exits
the group rebalances and its partitions move to the others (from the offsets committed for
them). With --partition as well, the process reads that partition alone, outside the group's
membership, using the group only for its committed offsets.`,
		Args: noArgs("the topic goes in --topic"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := o.resolve(cmd.Flags()); err != nil {
				return err
			}
			return runConsume(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	addBootstrapFlags(f, &o.broker)
	f.StringVarP(&o.topic, "topic", "t", "", "topic to consume (required)")
	f.StringVar(&o.group, "group", "", "consumer group to join: the processes with the same --group share the topic's partitions and resume from the group's committed offsets (with --partition: that partition only, no membership)")
	f.StringVar(&o.offset, "offset", "", "start offset: earliest, latest, or a number (with --partition)")
	f.BoolVar(&o.fromBeginning, "from-beginning", false, "start from the earliest offset (with --group: where nothing is committed)")
	f.Int32Var(&o.partition, "partition", -1, "consume only this partition (-1: all)")
	f.IntVar(&o.maxMessages, "max-messages", 0, "exit after printing this many records (default: no limit)")
	f.StringVar(&o.format, "format", "", "kcat-like output format, e.g. '%k:%s\\n' (default: the value and a newline)")
	f.DurationVar(&o.timeout, "timeout", 0, "exit when no record arrives for this long (default: wait forever)")
	f.IntVar(&o.timeoutMs, "timeout-ms", 0, "exit when no record arrives for this many milliseconds, as kafka-console-consumer's (--timeout in milliseconds)")
	f.StringArrayVar(&o.clientProps, "consumer-property", nil, "a consumer property `key=value`, Kafka's name (repeatable): "+propertiesHelp(consumerProperties))
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

func runConsume(ctx context.Context, o consumeOptions, stdout, stderr io.Writer) error {
	if o.offset != "" && o.fromBeginning {
		return errors.New("--offset and --from-beginning cannot be used together")
	}
	if o.offset != "" && o.group != "" {
		return errors.New("--offset and --group cannot be used together: a group starts from its committed offsets")
	}
	if o.maxMessages < 0 || o.timeout < 0 {
		return errors.New("--max-messages and --timeout cannot be negative")
	}
	if o.partition < -1 {
		return fmt.Errorf("--partition %d: want a partition number (from 0), or -1 for all", o.partition)
	}
	start, err := consumeStart(o.offset)
	if err != nil {
		return err
	}
	if _, err := strconv.ParseInt(o.offset, 10, 64); err == nil && o.partition < 0 {
		return fmt.Errorf("--offset %s needs --partition: offsets are a partition's own (earliest and latest go without)", o.offset)
	}
	format := defaultConsumeFormat
	if o.format != "" {
		if format, err = parseConsumeFormat(o.format); err != nil {
			return err
		}
	}
	cfg := client.ConsumerConfig{
		Config:          client.Config{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))},
		AutoOffsetReset: client.OffsetResetLatest,
	}
	if o.fromBeginning {
		cfg.AutoOffsetReset = client.OffsetResetEarliest
	}
	if err := consumerProperties.apply("--consumer-property", o.props, &cfg); err != nil {
		return err
	}
	numericOffset := false
	if _, err := strconv.ParseInt(o.offset, 10, 64); err == nil {
		// An offset the log does not hold is reported, not replaced by the log's end (Kafka's
		// console consumer moves there silently, and prints nothing until new records come).
		numericOffset = true
		cfg.AutoOffsetReset = client.OffsetResetNone
	}
	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := client.NewConsumer(setupCtx, cfg)
	if err != nil {
		return err
	}
	if err := consumeAssign(setupCtx, c, o, start); err != nil {
		// Nothing was consumed (a missing topic or partition): no summary, which would
		// read as a run that found nothing.
		_ = closeConsumer(c)
		return err
	}
	n, err := consumeLoop(ctx, c, o, format, stdout)
	if numericOffset && errors.Is(err, wire.ErrOffsetOutOfRange) {
		err = fmt.Errorf("--offset %s: %w", o.offset, err)
	}
	if cerr := closeConsumer(c); err == nil {
		err = cerr
	}
	fmt.Fprintf(stderr, "Processed a total of %d messages\n", n)
	return err
}

// closeConsumer closes c, which commits (with --group) the positions of what was printed.
func closeConsumer(c *client.Consumer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Close(ctx)
}

// consumeStart parses --offset before anything connects, into how to position the assigned
// partitions: nil for where the group's commits or --from-beginning say.
func consumeStart(offset string) (func(c *client.Consumer, tps []client.TopicPartition) error, error) {
	switch offset {
	case "":
		return nil, nil
	case "earliest":
		return func(c *client.Consumer, _ []client.TopicPartition) error { return c.SeekToBeginning(nil) }, nil
	case "latest":
		return func(c *client.Consumer, _ []client.TopicPartition) error { return c.SeekToEnd(nil) }, nil
	}
	off, err := strconv.ParseInt(offset, 10, 64)
	if err != nil || off < 0 {
		return nil, fmt.Errorf("--offset %q: want earliest, latest or an offset >= 0", offset)
	}
	return func(c *client.Consumer, tps []client.TopicPartition) error {
		for _, tp := range tps {
			if err := c.Seek(tp, off); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// consumeAssign assigns the partitions to consume (--partition, else all of the topic's) and
// positions them (start, from --offset).
func consumeAssign(ctx context.Context, c *client.Consumer, o consumeOptions, start func(*client.Consumer, []client.TopicPartition) error) error {
	tps, err := c.PartitionsFor(ctx, o.topic)
	if err != nil {
		return err
	}
	if o.partition >= 0 {
		if int(o.partition) >= len(tps) {
			return fmt.Errorf("--partition %d: topic %s has %d partitions", o.partition, o.topic, len(tps))
		}
		tps = tps[o.partition : o.partition+1]
	} else if o.group != "" {
		// Group membership: the coordinator's assignment says which partitions are ours.
		return c.Subscribe(o.topic)
	}
	if err := c.Assign(tps); err != nil {
		return err
	}
	if start == nil {
		return nil
	}
	return start(c, tps)
}

// consumeLoop prints the assigned partitions' records until --max-messages, --timeout or an
// interrupt, and returns how many it printed.
func consumeLoop(ctx context.Context, c *client.Consumer, o consumeOptions, format consumeFormat, stdout io.Writer) (int, error) {
	w := bufio.NewWriterSize(stdout, 64<<10)
	defer w.Flush()
	var line []byte
	n := 0
	for o.maxMessages == 0 || n < o.maxMessages {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if o.timeout > 0 {
			pollCtx, cancel = context.WithTimeout(ctx, o.timeout)
		}
		recs, err := c.Poll(pollCtx)
		cancel()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				return n, nil // interrupted, or --timeout without a record
			}
			return n, err
		}
		printed := len(recs)
		if o.maxMessages > 0 {
			printed = min(printed, o.maxMessages-n)
		}
		for i := range recs[:printed] {
			line = format.appendRecord(line[:0], &recs[i])
			if _, err := w.Write(line); err != nil {
				return n, err
			}
			n++
		}
		if err := w.Flush(); err != nil {
			return n, err
		}
		// Records Poll returned but --max-messages left unprinted are not consumed: move back
		// so that the commit on exit does not skip them.
		rewound := map[client.TopicPartition]bool{}
		for _, r := range recs[printed:] {
			tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			if !rewound[tp] {
				rewound[tp] = true
				if err := c.Seek(tp, r.Offset); err != nil {
					return n, err
				}
			}
		}
	}
	return n, nil
}

// consumeFormat is a compiled --format string: literal text and record fields.
type consumeFormat []consumeFormatOp

type consumeFormatOp struct {
	field byte // 0: literal text
	text  string
}

var defaultConsumeFormat = consumeFormat{{field: 'v'}, {text: "\n"}}

// parseConsumeFormat compiles a kcat-like format string.
func parseConsumeFormat(s string) (consumeFormat, error) {
	var out consumeFormat
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			out = append(out, consumeFormatOp{text: string(lit)})
			lit = lit[:0]
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch != '%' && ch != '\\' {
			lit = append(lit, ch)
			continue
		}
		if i+1 == len(s) {
			return nil, fmt.Errorf("--format %q: %q at the end", s, ch)
		}
		i++
		next := s[i]
		if ch == '\\' {
			switch next {
			case 'n':
				lit = append(lit, '\n')
			case 't':
				lit = append(lit, '\t')
			case 'r':
				lit = append(lit, '\r')
			case '\\':
				lit = append(lit, '\\')
			default:
				return nil, fmt.Errorf("--format %q: unknown escape \\%c", s, next)
			}
			continue
		}
		switch next {
		case '%':
			lit = append(lit, '%')
		case 's', 'k', 't', 'p', 'o', 'T', 'S', 'K', 'h':
			flush()
			out = append(out, consumeFormatOp{field: next})
		default:
			return nil, fmt.Errorf("--format %q: unknown field %%%c (want %%s %%k %%t %%p %%o %%T %%S %%K %%h %%%%)", s, next)
		}
	}
	flush()
	return out, nil
}

func appendNullableLen(dst, b []byte) []byte {
	if b == nil {
		return append(dst, "-1"...)
	}
	return strconv.AppendInt(dst, int64(len(b)), 10)
}

// appendRecord appends r as the format says.
func (f consumeFormat) appendRecord(dst []byte, r *client.Record) []byte {
	for _, op := range f {
		switch op.field {
		case 0:
			dst = append(dst, op.text...)
		case 'v': // the default format: kafka-console-consumer prints null values as "null"
			if r.Value == nil {
				dst = append(dst, "null"...)
			}
			dst = append(dst, r.Value...)
		case 's':
			dst = append(dst, r.Value...)
		case 'k':
			dst = append(dst, r.Key...)
		case 't':
			dst = append(dst, r.Topic...)
		case 'p':
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case 'T':
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case 'S':
			dst = appendNullableLen(dst, r.Value)
		case 'K':
			dst = appendNullableLen(dst, r.Key)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = append(dst, h.Value...)
			}
		}
	}
	return dst
}
