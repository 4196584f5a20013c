package main

import (
	"errors"
	"fmt"
	suggestname "github.com/sluicemq/sluice/internal/suggest"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
)

// A clientProperty is one Kafka client property that --producer-property or
// --consumer-property takes, and how it sets the client's config.
type clientProperty[C any] struct {
	name string
	set  func(c *C, v string) error
}

// properties is a table of clientProperty, by Kafka name.
type properties[C any] []clientProperty[C]

func (ps properties[C]) names() []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.name
	}
	return out
}

// propertySet is the properties a client is configured with, by Kafka name, and where each
// came from, for the errors: "--producer-property acks=2", or a command's own flag "--acks 2".
type propertySet struct {
	values  map[string]string
	origins map[string]string // property to "--flag value"; absent: the --*-property flag
}

// apply sets c from props, in the table's order. An unknown name is refused with the names it
// may be a misspelling of.
func (ps properties[C]) apply(flag string, set propertySet, c *C) error {
	props := set.values
	for k := range props {
		if !slices.ContainsFunc(ps, func(p clientProperty[C]) bool { return p.name == k }) {
			msg := fmt.Sprintf("%s %s: unknown property", flag, k)
			if s := suggest(k, ps.names()); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return errors.New(msg + " (see --help for the ones taken)")
		}
	}
	for _, p := range ps {
		v, ok := props[p.name]
		if !ok {
			continue
		}
		if err := p.set(c, v); err != nil {
			if o, ok := set.origins[p.name]; ok {
				return fmt.Errorf("%s: %w", o, err)
			}
			return fmt.Errorf("%s %s=%s: %w", flag, p.name, v, err)
		}
	}
	return nil
}

// collectProperties merges the K=V values of a --*-property flag with the properties the
// command's own flags set (flagProps: property name to flag name, for the flags given on the
// command line; defaults: the command's defaults for them, by property). A property given both
// ways, or twice, is refused: which one would win is not obvious.
func collectProperties(flag string, kvs []string, fs *pflag.FlagSet, flagProps map[string]string, defaults map[string]string) (propertySet, error) {
	out := map[string]string{}
	origins := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return propertySet{}, fmt.Errorf("%s %q: want key=value", flag, kv)
		}
		if _, dup := out[k]; dup {
			return propertySet{}, fmt.Errorf("%s %s: given twice", flag, k)
		}
		out[k] = v
	}
	for prop, name := range flagProps {
		f := fs.Lookup(name)
		if f == nil || !f.Changed {
			continue
		}
		if _, dup := out[prop]; dup {
			return propertySet{}, fmt.Errorf("--%s and %s %s= both set %s: give one", name, flag, prop, prop)
		}
		out[prop] = f.Value.String()
		origins[prop] = "--" + name + " " + f.Value.String()
	}
	for prop, v := range defaults {
		if _, ok := out[prop]; !ok {
			out[prop] = v
			origins[prop] = "--" + flagProps[prop] + " " + v
		}
	}
	return propertySet{out, origins}, nil
}

// suggest returns the names within an edit distance of 2 of k (or that contain it), closest
// first: "did you mean".
func suggest(k string, names []string) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, n := range names {
		d := suggestname.Distance(k, n)
		if d <= 2 || len(k) >= 4 && strings.Contains(n, k) {
			cs = append(cs, cand{n, d})
		}
	}
	slices.SortStableFunc(cs, func(x, y cand) int { return x.d - y.d })
	out := make([]string, 0, min(len(cs), 3))
	for _, c := range cs[:min(len(cs), 3)] {
		out = append(out, c.name)
	}
	return out
}

// Value parsers, each refusing what Kafka refuses.

func parseMs(v string) (time.Duration, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want milliseconds (an integer >= 0)")
	}
	return time.Duration(n) * time.Millisecond, nil
}

func parsePositiveMs(v string) (time.Duration, error) {
	d, err := parseMs(v)
	if err == nil && d == 0 {
		err = fmt.Errorf("want milliseconds > 0")
	}
	return d, err
}

func parseCount(v string, minimum int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < minimum {
		return 0, fmt.Errorf("want an integer >= %d", minimum)
	}
	return n, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("want true or false")
}

// zeroAsNegative maps Kafka's 0 to the client's negative value where the client's zero means
// "the default" (linger.ms=0, retries=0, retry.backoff.ms=0).
func zeroAsNegative[T ~int | ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// commonProperties are the client.Config properties both clients take.
func commonProperties[C any](cfg func(*C) *client.Config) properties[C] {
	return properties[C]{
		{"bootstrap.servers", func(c *C, v string) error {
			addrs, err := bootstrapServers(v)
			cfg(c).Brokers = addrs
			return err
		}},
		{"client.id", func(c *C, v string) error { cfg(c).ClientID = v; return nil }},
		{"metadata.max.age.ms", func(c *C, v string) error {
			d, err := parsePositiveMs(v)
			cfg(c).MetadataMaxAge = d
			return err
		}},
		{"request.timeout.ms", func(c *C, v string) error {
			d, err := parsePositiveMs(v)
			cfg(c).RequestTimeout = d
			return err
		}},
	}
}

// producerProperties are the producer properties --producer-property takes.
var producerProperties = append(commonProperties(func(c *client.ProducerConfig) *client.Config { return &c.Config }), properties[client.ProducerConfig]{
	{"acks", func(c *client.ProducerConfig, v string) (err error) {
		c.Acks, err = client.ParseAcks(v)
		if err != nil {
			err = errors.New("want all, -1, 1 or 0")
		}
		return err
	}},
	{"linger.ms", func(c *client.ProducerConfig, v string) error {
		d, err := parseMs(v)
		c.Linger = zeroAsNegative(d)
		return err
	}},
	{"batch.size", func(c *client.ProducerConfig, v string) (err error) { c.BatchSize, err = parseCount(v, 1); return err }},
	{"buffer.memory", func(c *client.ProducerConfig, v string) error {
		n, err := parseCount(v, 1)
		c.BufferMemory = int64(n)
		return err
	}},
	{"max.block.ms", func(c *client.ProducerConfig, v string) (err error) { c.MaxBlock, err = parsePositiveMs(v); return err }},
	{"compression.type", func(c *client.ProducerConfig, v string) (err error) {
		if c.Compression, err = batch.ParseCodec(v); err != nil {
			err = errors.New("want none, gzip, snappy, lz4 or zstd")
		}
		return err
	}},
	{"retries", func(c *client.ProducerConfig, v string) error {
		n, err := parseCount(v, 0)
		c.Retries = zeroAsNegative(n)
		return err
	}},
	{"retry.backoff.ms", func(c *client.ProducerConfig, v string) error {
		d, err := parseMs(v)
		c.RetryBackoff = zeroAsNegative(d)
		return err
	}},
	{"retry.backoff.max.ms", func(c *client.ProducerConfig, v string) error {
		d, err := parseMs(v)
		c.RetryBackoffMax = zeroAsNegative(d)
		return err
	}},
	{"delivery.timeout.ms", func(c *client.ProducerConfig, v string) (err error) {
		c.DeliveryTimeout, err = parsePositiveMs(v)
		return err
	}},
	{"max.in.flight.requests.per.connection", func(c *client.ProducerConfig, v string) (err error) {
		c.MaxInFlight, err = parseCount(v, 1)
		return err
	}},
	{"max.request.size", func(c *client.ProducerConfig, v string) (err error) {
		c.MaxRequestSize, err = parseCount(v, 1)
		return err
	}},
	{"enable.idempotence", func(c *client.ProducerConfig, v string) error {
		on, err := parseBool(v)
		c.EnableIdempotence = &on // unset: on unless acks, max.in.flight or retries rule it out
		return err
	}},
}...)

// consumerProperties are the consumer properties --consumer-property takes.
var consumerProperties = append(commonProperties(func(c *client.ConsumerConfig) *client.Config { return &c.Config }), properties[client.ConsumerConfig]{
	{"group.id", func(c *client.ConsumerConfig, v string) error { c.GroupID = v; return nil }},
	{"group.instance.id", func(c *client.ConsumerConfig, v string) error { c.GroupInstanceID = v; return nil }},
	{"session.timeout.ms", func(c *client.ConsumerConfig, v string) (err error) {
		c.SessionTimeout, err = parsePositiveMs(v)
		return err
	}},
	{"heartbeat.interval.ms", func(c *client.ConsumerConfig, v string) (err error) {
		c.HeartbeatInterval, err = parsePositiveMs(v)
		return err
	}},
	{"max.poll.interval.ms", func(c *client.ConsumerConfig, v string) (err error) {
		c.MaxPollInterval, err = parsePositiveMs(v)
		return err
	}},
	{"partition.assignment.strategy", func(c *client.ConsumerConfig, v string) error {
		c.Assignors = nil
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				c.Assignors = append(c.Assignors, n)
			}
		}
		return nil
	}},
	{"fetch.min.bytes", func(c *client.ConsumerConfig, v string) (err error) {
		c.FetchMinBytes, err = parseCount(v, 1)
		return err
	}},
	{"fetch.max.wait.ms", func(c *client.ConsumerConfig, v string) (err error) {
		c.FetchMaxWait, err = parsePositiveMs(v)
		return err
	}},
	{"fetch.max.bytes", func(c *client.ConsumerConfig, v string) (err error) {
		c.FetchMaxBytes, err = parseCount(v, 1)
		return err
	}},
	{"max.partition.fetch.bytes", func(c *client.ConsumerConfig, v string) (err error) {
		c.MaxPartitionFetchBytes, err = parseCount(v, 1)
		return err
	}},
	{"max.poll.records", func(c *client.ConsumerConfig, v string) (err error) {
		c.MaxPollRecords, err = parseCount(v, 1)
		return err
	}},
	{"auto.offset.reset", func(c *client.ConsumerConfig, v string) error {
		switch v {
		case client.OffsetResetEarliest, client.OffsetResetLatest, client.OffsetResetNone:
			c.AutoOffsetReset = v
			return nil
		}
		return errors.New("want earliest, latest or none")
	}},
	{"enable.auto.commit", func(c *client.ConsumerConfig, v string) error {
		on, err := parseBool(v)
		c.EnableAutoCommit = &on
		return err
	}},
	{"auto.commit.interval.ms", func(c *client.ConsumerConfig, v string) (err error) {
		c.AutoCommitInterval, err = parsePositiveMs(v)
		return err
	}},
	{"default.api.timeout.ms", func(c *client.ConsumerConfig, v string) (err error) {
		c.DefaultAPITimeout, err = parsePositiveMs(v)
		return err
	}},
	{"retry.backoff.ms", func(c *client.ConsumerConfig, v string) (err error) {
		c.RetryBackoff, err = parsePositiveMs(v)
		return err
	}},
	{"retry.backoff.max.ms", func(c *client.ConsumerConfig, v string) (err error) {
		c.RetryBackoffMax, err = parsePositiveMs(v)
		return err
	}},
}...)

// propertiesHelp lists the names a --*-property flag takes.
func propertiesHelp[C any](ps properties[C]) string {
	names := ps.names()
	slices.Sort(names)
	return strings.Join(names, ", ")
}
