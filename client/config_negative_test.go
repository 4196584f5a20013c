package client

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A negative size, count or time that has no meaning is refused by name, not taken for the
// default; where a negative value selects Kafka's zero (the producer's linger, retries and
// backoffs), it still does.
func TestConfigNegativeValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ProducerConfig
	}{
		{"batch.size", ProducerConfig{BatchSize: -5}},
		{"buffer.memory", ProducerConfig{BufferMemory: -1}},
		{"max.block.ms", ProducerConfig{MaxBlock: -time.Second}},
		{"delivery.timeout.ms", ProducerConfig{DeliveryTimeout: -time.Second}},
		{"max.in.flight.requests.per.connection", ProducerConfig{MaxInFlight: -1}},
		{"max.request.size", ProducerConfig{MaxRequestSize: -1}},
	} {
		if _, err := tc.cfg.withDefaults(); !errors.Is(err, ErrProducerConfig) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("producer %s negative: %v, want ErrProducerConfig naming it", tc.name, err)
		}
	}
	for _, tc := range []struct {
		name string
		cfg  ConsumerConfig
	}{
		{"fetch.min.bytes", ConsumerConfig{FetchMinBytes: -1}},
		{"fetch.max.wait.ms", ConsumerConfig{FetchMaxWait: -time.Millisecond}},
		{"max.partition.fetch.bytes", ConsumerConfig{MaxPartitionFetchBytes: -1}},
		{"fetch.max.bytes", ConsumerConfig{FetchMaxBytes: -1}},
		{"max.poll.records", ConsumerConfig{MaxPollRecords: -1}},
		{"auto.commit.interval.ms", ConsumerConfig{AutoCommitInterval: -time.Second}},
		{"retry.backoff.ms", ConsumerConfig{RetryBackoff: -time.Second}},
		{"retry.backoff.max.ms", ConsumerConfig{RetryBackoffMax: -time.Second}},
		{"MaxDecompressed", ConsumerConfig{MaxDecompressed: -1}},
	} {
		if _, err := tc.cfg.withDefaults(); !errors.Is(err, ErrConsumerConfig) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("consumer %s negative: %v, want ErrConsumerConfig naming it", tc.name, err)
		}
	}

	// Negative selects zero where zero means something.
	p, err := ProducerConfig{Linger: -1, Retries: -1, RetryBackoff: -1, RetryBackoffMax: -1}.withDefaults()
	if err != nil || p.Linger != 0 || p.Retries != 0 || p.RetryBackoff != 0 || p.RetryBackoffMax != 0 {
		t.Errorf("negative linger, retries and backoffs: %+v, %v; want each 0", p, err)
	}
	// Zero takes the defaults.
	if p, err := (ProducerConfig{}).withDefaults(); err != nil || p.BatchSize != 16384 || p.MaxInFlight != 5 {
		t.Errorf("zero producer config: %v", err)
	}
	if c, err := (ConsumerConfig{}).withDefaults(); err != nil || c.MaxPollRecords != 500 || c.FetchMaxWait != 500*time.Millisecond {
		t.Errorf("zero consumer config: %v", err)
	}
}
