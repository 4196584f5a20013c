package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTopicConfigDefaults(t *testing.T) {
	d := DefaultTopicConfig()
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"cleanup.policy", d.CleanupPolicy, "delete"},
		{"compression.type", d.CompressionType, "producer"},
		{"retention.ms", d.Retention, 7 * 24 * time.Hour},
		{"retention.bytes", d.RetentionBytes, int64(-1)},
		{"segment.bytes", d.SegmentBytes, int64(1 << 30)},
		{"segment.ms", d.SegmentTime, 7 * 24 * time.Hour},
		{"segment.index.bytes", d.SegmentIndexBytes, int64(10 << 20)},
		{"index.interval.bytes", d.IndexIntervalBytes, int64(4096)},
		{"max.message.bytes", d.MaxMessageBytes, int64(1048588)},
		{"min.insync.replicas", d.MinInsyncReplicas, int64(1)},
		{"flush.messages", d.FlushMessages, int64(1<<63 - 1)},
		{"flush.ms", d.FlushInterval, Forever},
		{"message.timestamp.type", d.TimestampType, "CreateTime"},
		{"unclean.leader.election.enable", d.UncleanLeaderElect, false},
		{"write.caching", d.WriteCaching, false},
		{"min.cleanable.dirty.ratio", d.MinCleanableRatio, 0.5},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestTopicConfigRegistry(t *testing.T) {
	defs := TopicConfigDefs()
	if !slices.IsSortedFunc(defs, func(a, b TopicConfigDef) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatal("registry not sorted by name: LookupTopicConfig binary-searches it")
	}
	for _, d := range defs {
		got, ok := LookupTopicConfig(d.Name)
		if !ok || got.Name != d.Name {
			t.Errorf("LookupTopicConfig(%q) = %v, %v", d.Name, got.Name, ok)
		}
		if err := ValidateTopicConfigs(map[string]string{d.Name: d.Default}); err != nil {
			t.Errorf("default of %s does not validate: %v", d.Name, err)
		}
	}
	if _, ok := LookupTopicConfig("no.such.key"); ok {
		t.Error("found an unknown key")
	}
}

func TestResolveTopicConfig(t *testing.T) {
	base := DefaultTopicConfig()
	base.WriteCaching = true // a broker default that an override can turn off

	got, err := ResolveTopicConfig(map[string]string{
		"retention.ms":        " 1000 ", // Kafka trims numbers
		"retention.bytes":     "-1",
		"segment.bytes":       "1048576",
		"flush.ms":            "9223372036854775807",
		"write.caching":       "FALSE",
		"cleanup.policy":      "delete",
		"min.insync.replicas": "2",
	}, base)
	if err != nil {
		t.Fatal(err)
	}
	if got.Retention != time.Second || got.SegmentBytes != 1<<20 || got.FlushInterval != Forever ||
		got.WriteCaching || got.MinInsyncReplicas != 2 || got.RetentionBytes != -1 {
		t.Errorf("resolved %+v", got)
	}
	if got.SegmentTime != base.SegmentTime {
		t.Error("a key without override did not keep the default")
	}

	bad := []struct {
		key, value, want string
	}{
		{"no.such.key", "1", "unknown topic config"},
		{"retention.ms", "abc", "retention.ms"},
		{"retention.ms", "-2", "at least -1"},
		{"segment.bytes", "13", "segment.bytes"},
		{"segment.bytes", "2147483648", "segment.bytes"},
		{"segment.ms", "0", "segment.ms"},
		{"cleanup.policy", "compact", "compact is not supported"},
		{"cleanup.policy", "compact,delete", "compact is not supported"},
		{"cleanup.policy", "nope", "cleanup.policy"},
		{"compression.type", "gzip", "recompression"},
		{"message.timestamp.type", "createtime", "CreateTime or LogAppendTime"},
		{"unclean.leader.election.enable", "yes", "true or false"},
		{"min.insync.replicas", "0", "min.insync.replicas"},
		{"min.cleanable.dirty.ratio", "1.5", "[0, 1]"},
		{"flush.messages", "0", "flush.messages"},
		{"max.message.bytes", "", "not an integer"},
	}
	for _, b := range bad {
		_, err := ResolveTopicConfig(map[string]string{b.key: b.value}, base)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s=%q: err %v, want ErrInvalidConfig mentioning %q", b.key, b.value, err, b.want)
		}
		if err2 := ValidateTopicConfigs(map[string]string{b.key: b.value}); !errors.Is(err2, ErrInvalidConfig) {
			t.Errorf("ValidateTopicConfigs %s=%q: %v", b.key, b.value, err2)
		}
	}

	_, err = ResolveTopicConfig(map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, base)
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("min > max compaction lag: %v", err)
	}
}

// Every known key says what it does: the CLI's help lists them (sluice topic create --help).
func TestTopicConfigDefsAreDocumented(t *testing.T) {
	for _, d := range TopicConfigDefs() {
		if strings.TrimSpace(d.Doc) == "" {
			t.Errorf("topic config %s has no Doc", d.Name)
		}
	}
}
