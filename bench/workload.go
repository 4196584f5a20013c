package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Workload is a workload file, in the OpenMessaging Benchmark's spirit:
//
//	name: 1kib-max-rate
//	topics: 1
//	partitionsPerTopic: 1
//	messageSize: 1024
//	payload: random          # random, text, or file (with payloadFile)
//	producers: 1             # in all, spread over the topics (at least one per topic)
//	consumers: 0             # 0: a produce run; one per topic: an end-to-end run (needs producerRate)
//	producerRate: 0          # records/s for all producers; 0: flat out
//	producerRateOfMax: 0     # or: this fraction (0 to 1] of the maximum rate, probed first
//	duration: 5s             # measured time (or records: N, N >= 1)
//	warmup: 1s
//	acks: 1                  # all, -1, 1 or 0
//	compression: none
//	batchSize: 16384
//	lingerMs: 5
//
// Unknown keys are errors, so that a typo never silently keeps a default, and so are a file
// of more than one YAML document (a second one would be ignored) and an empty file.
type Workload struct {
	Name               string  `yaml:"name"`
	Topics             int     `yaml:"topics"`
	PartitionsPerTopic int     `yaml:"partitionsPerTopic"`
	MessageSize        int     `yaml:"messageSize"`
	Payload            string  `yaml:"payload"`
	PayloadFile        string  `yaml:"payloadFile"`
	Producers          int     `yaml:"producers"`
	Consumers          int     `yaml:"consumers"`
	ProducerRate       float64 `yaml:"producerRate"`
	ProducerRateOfMax  float64 `yaml:"producerRateOfMax"`
	Duration           string  `yaml:"duration"`
	Records            *int64  `yaml:"records"` // nil: left out (then duration is given)
	Warmup             string  `yaml:"warmup"`
	Acks               string  `yaml:"acks"`
	Compression        string  `yaml:"compression"`
	BatchSize          int     `yaml:"batchSize"`
	LingerMs           *int    `yaml:"lingerMs"`
}

// ErrWorkload wraps every error in a workload file.
var ErrWorkload = errors.New("bench: workload")

// LoadWorkload reads and checks a workload file.
func LoadWorkload(path string) (Workload, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Workload{}, err
	}
	w, err := ParseWorkload(b)
	if err != nil {
		return Workload{}, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// ParseWorkload decodes and checks a workload.
func ParseWorkload(b []byte) (Workload, error) {
	var w Workload
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		if errors.Is(err, io.EOF) {
			return Workload{}, fmt.Errorf("%w: empty workload file (no YAML document)", ErrWorkload)
		}
		return Workload{}, fmt.Errorf("%w: %v", ErrWorkload, err)
	}
	// One workload per file: the decoder reads one document at a time, so a second one
	// (after a "---") would be silently ignored, unknown keys and all.
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return Workload{}, fmt.Errorf("%w: more than one YAML document (\"---\"): a workload file holds one workload", ErrWorkload)
	}
	if _, err := w.Config(); err != nil {
		return Workload{}, err
	}
	return w, nil
}

// Mode is the kind of run the workload asks for: ModeE2E with consumers, else ModeProduce.
func (w Workload) Mode() string {
	if w.Consumers > 0 {
		return ModeE2E
	}
	return ModeProduce
}

// ParseAcks reads "all", "-1", "1" or "0" ("" is 1).
func ParseAcks(s string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "all", "-1":
		return -1, nil
	case "1", "":
		return 1, nil
	case "0":
		return 0, nil
	}
	return 0, fmt.Errorf("acks %q: want all, -1, 1 or 0", s)
}

// Config is the run the workload describes (with CreateTopic set).
func (w Workload) Config() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrWorkload}, args...)...)
	}
	c := Config{Name: w.Name, Topic: "bench-" + w.Name, Topics: w.Topics, Partitions: w.PartitionsPerTopic,
		CreateTopic: true, RecordSize: w.MessageSize, Payload: w.Payload, PayloadFile: w.PayloadFile,
		Producers: w.Producers, Rate: w.ProducerRate, RateOfMax: w.ProducerRateOfMax, Compression: w.Compression,
		BatchSize: w.BatchSize, AcksSet: true}
	if w.Name == "" {
		return bad("no name")
	}
	if strings.ContainsAny(w.Name, " /\\") {
		return bad("name %q: no spaces or slashes (it names the topic)", w.Name)
	}
	if w.Topics < 0 || w.PartitionsPerTopic < 0 || w.Producers < 0 || w.Consumers < 0 || w.BatchSize < 0 {
		return bad("counts cannot be negative")
	}
	if w.Records != nil {
		// As the CLI's --records: a count given is at least 1, never a way of saying "no
		// count" (which is leaving it out).
		if *w.Records <= 0 {
			return bad("records %d: want at least 1 record, or leave records out and give duration to run for a time", *w.Records)
		}
		c.Records = *w.Records
	}
	if topics, producers := max(w.Topics, 1), max(w.Producers, 1); topics > producers {
		// producers counts them in all, producer k writing to topic k % topics: fewer
		// producers than topics would leave topics empty (an e2e run's consumers waiting on
		// nothing). The OpenMessaging Benchmark's producersPerTopic cannot; here, say so.
		return bad("topics %d, producers %d: producers are counted in all and spread over the topics, so give at least one per topic (producers: %d)", topics, producers, topics)
	}
	if w.MessageSize <= 0 {
		return bad("messageSize %d: must be positive", w.MessageSize)
	}
	if !validRate(w.ProducerRate) { // YAML's .nan and .inf included
		return bad("producerRate %v: want a finite number, not negative", w.ProducerRate)
	}
	if !validFraction(w.ProducerRateOfMax) {
		return bad("producerRateOfMax %v: want a fraction in (0, 1]", w.ProducerRateOfMax)
	}
	if w.ProducerRate > 0 && w.ProducerRateOfMax > 0 {
		return bad("give producerRate or producerRateOfMax, not both")
	}
	switch w.Payload {
	case "", PayloadRandom, PayloadText:
		if w.PayloadFile != "" {
			return bad("payloadFile needs payload: file")
		}
	case PayloadFile:
		if w.PayloadFile == "" {
			return bad("payload: file needs payloadFile")
		}
	default:
		return bad("payload %q: want random, text or file", w.Payload)
	}
	switch w.Compression {
	case "", "none", "gzip", "snappy", "lz4", "zstd":
	default:
		return bad("compression %q: want none, gzip, snappy, lz4 or zstd", w.Compression)
	}
	var err error
	if c.Acks, err = ParseAcks(w.Acks); err != nil {
		return bad("%v", err)
	}
	if w.Duration != "" {
		if c.Duration, err = time.ParseDuration(w.Duration); err != nil || c.Duration <= 0 {
			return bad("duration %q: want a positive duration such as 10s", w.Duration)
		}
	}
	if (w.Duration == "") == (w.Records == nil) {
		return bad("give exactly one of duration and records")
	}
	if w.Warmup != "" {
		if c.Warmup, err = time.ParseDuration(w.Warmup); err != nil || c.Warmup < 0 {
			return bad("warmup %q: want a duration such as 1s", w.Warmup)
		}
	}
	c.LingerMs = 5
	if w.LingerMs != nil {
		if *w.LingerMs < 0 {
			return bad("lingerMs %d: cannot be negative", *w.LingerMs)
		}
		c.LingerMs = *w.LingerMs
	}
	if w.Consumers > 0 {
		topics := max(w.Topics, 1)
		if w.Consumers != topics {
			return bad("consumers %d: only one consumer per topic (%d) is supported", w.Consumers, topics)
		}
		if w.ProducerRate <= 0 && w.ProducerRateOfMax <= 0 {
			return bad("an end-to-end workload (consumers > 0) needs a producerRate or a producerRateOfMax")
		}
		if w.MessageSize < e2eHeader {
			return bad("messageSize %d: an end-to-end workload needs at least %d bytes", w.MessageSize, e2eHeader)
		}
	}
	return c, nil
}

// String is a one-line description of the workload.
func (w Workload) String() string {
	rate := "max rate"
	if w.ProducerRate > 0 {
		rate = strconv.FormatFloat(w.ProducerRate, 'f', -1, 64) + " records/s"
	} else if w.ProducerRateOfMax > 0 {
		rate = strconv.FormatFloat(w.ProducerRateOfMax, 'f', -1, 64) + " of the max rate"
	}
	return fmt.Sprintf("%s: %s, %d B %s records, %s, acks=%s, compression=%s", w.Name, w.Mode(),
		w.MessageSize, orDefault(w.Payload, PayloadRandom), rate, orDefault(w.Acks, "1"), orDefault(w.Compression, "none"))
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
