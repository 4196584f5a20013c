package bench

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestShippedWorkloadsParse(t *testing.T) {
	files, err := filepath.Glob("workloads/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("workloads/*.yaml: %v, %v", files, err)
	}
	for _, f := range files {
		w, err := LoadWorkload(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		c, _ := w.Config()
		if c.Duration+c.Warmup > 10*time.Second {
			t.Errorf("%s: %v + %v warm-up: keep shipped workloads within 10 s", f, c.Duration, c.Warmup)
		}
	}
}

func TestParseWorkload(t *testing.T) {
	w, err := ParseWorkload([]byte(`
name: e2e
topics: 2
partitionsPerTopic: 3
messageSize: 100
payload: text
producers: 4
consumers: 2
producerRate: 5000
duration: 2s
warmup: 500ms
acks: all
compression: zstd
batchSize: 1000
lingerMs: 0
`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := w.Config()
	if err != nil {
		t.Fatal(err)
	}
	if w.Mode() != ModeE2E || c.Topics != 2 || c.Partitions != 3 || c.RecordSize != 100 || c.Payload != PayloadText ||
		c.Producers != 4 || c.Rate != 5000 || c.Duration != 2*time.Second || c.Warmup != 500*time.Millisecond ||
		c.Acks != -1 || c.Compression != "zstd" || c.BatchSize != 1000 || c.LingerMs != 0 || !c.CreateTopic {
		t.Errorf("config %+v", c)
	}
	if c.TopicName(1) != "bench-e2e-1" {
		t.Errorf("topic 1: %q", c.TopicName(1))
	}
	// Defaults: acks 1, linger 5 ms, a produce run.
	w, err = ParseWorkload([]byte("name: p\nmessageSize: 10\nrecords: 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := w.Config(); w.Mode() != ModeProduce || c.Acks != 1 || c.LingerMs != 5 || c.Records != 100 {
		t.Errorf("defaults: mode %s, %+v", w.Mode(), c)
	}
	// One document, marked as such, is one workload; so are more producers than topics.
	if _, err := ParseWorkload([]byte("---\nname: p\nmessageSize: 10\nrecords: 100\ntopics: 2\nproducers: 3\n")); err != nil {
		t.Errorf("a document after a leading ---: %v", err)
	}
}

func TestParseWorkloadErrors(t *testing.T) {
	const ok = "name: w\nmessageSize: 100\nduration: 1s\n"
	for _, c := range []struct{ name, yaml, want string }{
		{"not yaml", "name: [", "yaml"},
		{"unknown key", ok + "messagesize: 10\n", "messagesize"},
		{"no name", "messageSize: 100\nduration: 1s\n", "no name"},
		{"no size", "name: w\nduration: 1s\n", "messageSize"},
		{"neither duration nor records", "name: w\nmessageSize: 100\n", "exactly one"},
		{"both duration and records", ok + "records: 10\n", "exactly one"},
		{"records 0 beside duration", ok + "records: 0\n", "records 0: want at least 1 record, or leave records out"},
		{"records 0 alone", "name: w\nmessageSize: 100\nrecords: 0\n", "records 0: want at least 1 record, or leave records out"},
		{"negative records", "name: w\nmessageSize: 100\nrecords: -5\n", "records -5: want at least 1 record"},
		{"bad duration", "name: w\nmessageSize: 100\nduration: soon\n", "duration"},
		{"bad warmup", ok + "warmup: -1s\n", "warmup"},
		{"bad acks", ok + "acks: 2\n", "acks"},
		{"bad compression", ok + "compression: brotli\n", "compression"},
		{"bad payload", ok + "payload: zeros\n", "payload"},
		{"file without name", ok + "payload: file\n", "payloadFile"},
		{"negative rate", ok + "producerRate: -1\n", "producerRate"},
		{"NaN rate", ok + "producerRate: .nan\n", "producerRate"},
		{"infinite rate", ok + "producerRate: .inf\n", "producerRate"},
		{"NaN rate of max", ok + "producerRateOfMax: .nan\n", "producerRateOfMax"},
		{"e2e without rate", ok + "consumers: 1\n", "producerRate"},
		{"rate of max above 1", ok + "producerRateOfMax: 1.5\n", "producerRateOfMax"},
		{"rate and rate of max", ok + "producerRate: 10\nproducerRateOfMax: 0.5\n", "not both"},
		{"two consumers on a topic", ok + "consumers: 2\nproducerRate: 10\n", "one consumer per topic"},
		{"e2e record too small", "name: w\nmessageSize: 8\nduration: 1s\nconsumers: 1\nproducerRate: 10\n", "at least"},
		{"negative linger", ok + "lingerMs: -1\n", "lingerMs -1"},
		{"wrong type", ok + "producers: many\n", "yaml"},
		{"empty file", "", "empty workload file"},
		{"only a comment", "# nothing here\n", "empty workload file"},
		{"second document", ok + "---\nname: other\nmessagesize: 10\n", "more than one YAML document"},
		{"second document, empty", ok + "---\n", "more than one YAML document"},
		{"second document, not yaml", ok + "---\nname: [\n", "more than one YAML document"},
		{"more topics than producers", ok + "topics: 3\nproducers: 2\n", "at least one per topic"},
		{"topics without producers", ok + "topics: 2\n", "at least one per topic"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseWorkload([]byte(c.yaml))
			if !errors.Is(err, ErrWorkload) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v: want ErrWorkload mentioning %q", err, c.want)
			}
		})
	}
}

// TestRunRefusesTopicsWithoutProducers: producer k writes to topic k % topics, so a run with
// fewer producers than topics is refused before it creates a topic, as a workload file is.
func TestRunRefusesTopicsWithoutProducers(t *testing.T) {
	d := newMemDriver()
	c := Config{Topic: "t", Topics: 3, Producers: 2, Records: 10, CreateTopic: true, Rate: 1000, RecordSize: 64}
	if _, err := Produce(context.Background(), d, c); err == nil || !strings.Contains(err.Error(), "fewer producers than topics") {
		t.Errorf("produce: %v, want fewer producers than topics refused", err)
	}
	if _, err := E2E(context.Background(), d, c); err == nil || !strings.Contains(err.Error(), "fewer producers than topics") {
		t.Errorf("e2e: %v, want fewer producers than topics refused", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.mu.topics) != 0 {
		t.Errorf("topics created: %v", d.mu.topics)
	}
}
