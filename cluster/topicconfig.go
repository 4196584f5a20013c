package cluster

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TopicConfig is the typed form of a topic's configuration: Kafka's topic
// configs (plus Redpanda's write.caching) with Kafka's defaults. The broker
// builds it with ResolveTopicConfig from the topic's overrides (stored in
// TopicMeta.Configs as strings, exactly as the user gave them) over its own
// broker-level defaults.
//
// Millisecond configs become time.Duration. Kafka's "never" value
// (Long.MAX_VALUE ms) does not fit a Duration and saturates to Forever; a
// negative duration or size means unlimited where Kafka allows -1.
type TopicConfig struct {
	CleanupPolicy      string        // cleanup.policy; only "delete" is supported
	CompressionType    string        // compression.type; only "producer" (bytes in, bytes out)
	DeleteRetention    time.Duration // delete.retention.ms (compaction; stored, unused)
	FileDeleteDelay    time.Duration // file.delete.delay.ms (stored, unused: files go when their last reader is done)
	FlushMessages      int64         // flush.messages
	FlushInterval      time.Duration // flush.ms
	IndexIntervalBytes int64         // index.interval.bytes
	MaxCompactionLag   time.Duration // max.compaction.lag.ms (compaction; stored, unused)
	MaxMessageBytes    int64         // max.message.bytes
	TimestampAfterMax  time.Duration // message.timestamp.after.max.ms
	TimestampBeforeMax time.Duration // message.timestamp.before.max.ms
	TimestampType      string        // message.timestamp.type: CreateTime or LogAppendTime
	MinCleanableRatio  float64       // min.cleanable.dirty.ratio (compaction; stored, unused)
	MinCompactionLag   time.Duration // min.compaction.lag.ms (compaction; stored, unused)
	MinInsyncReplicas  int64         // min.insync.replicas
	Preallocate        bool          // preallocate (stored, unused: the broker's log.preallocate.bytes reserves blocks)
	RetentionBytes     int64         // retention.bytes; < 0 unlimited
	Retention          time.Duration // retention.ms; < 0 unlimited
	SegmentBytes       int64         // segment.bytes
	SegmentIndexBytes  int64         // segment.index.bytes
	SegmentJitter      time.Duration // segment.jitter.ms
	SegmentTime        time.Duration // segment.ms
	UncleanLeaderElect bool          // unclean.leader.election.enable: elect outside the ISR (ElectLeader)
	WriteCaching       bool          // write.caching (Redpanda): false = fsync before acks=all answers
}

// Forever is what Kafka's Long.MAX_VALUE milliseconds ("never") becomes.
const Forever = time.Duration(math.MaxInt64)

// ConfigType is the Kafka type of a config (DescribeConfigs reports it).
type ConfigType uint8

// Kafka's config types, in the order of DescribeConfigs' configType codes
// (1 = BOOLEAN ... 7 = LIST).
const (
	ConfigBoolean ConfigType = iota + 1
	ConfigString
	ConfigInt
	ConfigShort
	ConfigLong
	ConfigDouble
	ConfigList
)

// TopicConfigDef describes one known topic config key.
type TopicConfigDef struct {
	Name    string
	Type    ConfigType
	Default string // Kafka's default, in Kafka's string form
	Doc     string
	set     func(c *TopicConfig, v string) error
}

// The registry, sorted by name. Changing a rule here changes what Apply
// accepts, so a change must ship to every controller before any of them
// applies a command that depends on it (see the package doc).
var topicConfigDefs = []TopicConfigDef{
	{Name: "cleanup.policy", Type: ConfigList, Default: "delete",
		Doc: "delete old segments by time or size; compaction is not supported yet",
		set: func(c *TopicConfig, v string) error {
			policies := strings.Split(v, ",")
			for i := range policies {
				policies[i] = strings.TrimSpace(policies[i])
				switch policies[i] {
				case "delete":
				case "compact":
					return fmt.Errorf("compact is not supported yet; only delete")
				default:
					return fmt.Errorf("must be delete")
				}
			}
			c.CleanupPolicy = "delete"
			return nil
		}},
	{Name: "compression.type", Type: ConfigString, Default: "producer",
		Doc: "producer: keep the producer's codec; the broker never recompresses",
		set: func(c *TopicConfig, v string) error {
			switch v {
			case "producer":
				c.CompressionType = v
				return nil
			case "uncompressed", "zstd", "lz4", "snappy", "gzip":
				return fmt.Errorf("%s needs recompression, which the broker never does; only producer", v)
			}
			return fmt.Errorf("must be producer")
		}},
	{Name: "delete.retention.ms", Type: ConfigLong, Default: "86400000",
		Doc: "compaction: how long delete markers are kept (stored; Sluice does not compact yet)",
		set: msField(0, func(c *TopicConfig) *time.Duration { return &c.DeleteRetention })},
	{Name: "file.delete.delay.ms", Type: ConfigLong, Default: "60000",
		Doc: "stored, not applied: a deleted segment's files go once its last reader is done",
		set: msField(0, func(c *TopicConfig) *time.Duration { return &c.FileDeleteDelay })},
	{Name: "flush.messages", Type: ConfigLong, Default: "9223372036854775807",
		Doc: "fsync once this many records are unsynced",
		set: longField(1, math.MaxInt64, func(c *TopicConfig) *int64 { return &c.FlushMessages })},
	{Name: "flush.ms", Type: ConfigLong, Default: "9223372036854775807",
		Doc: "fsync once data has been unsynced this long",
		set: msField(0, func(c *TopicConfig) *time.Duration { return &c.FlushInterval })},
	{Name: "index.interval.bytes", Type: ConfigInt, Default: "4096",
		Doc: "bytes between offset index entries",
		set: longField(0, math.MaxInt32, func(c *TopicConfig) *int64 { return &c.IndexIntervalBytes })},
	{Name: "max.compaction.lag.ms", Type: ConfigLong, Default: "9223372036854775807",
		Doc: "compaction (stored; Sluice does not compact yet)",
		set: msField(1, func(c *TopicConfig) *time.Duration { return &c.MaxCompactionLag })},
	{Name: "max.message.bytes", Type: ConfigInt, Default: "1048588",
		Doc: "largest record batch the topic accepts",
		set: longField(0, math.MaxInt32, func(c *TopicConfig) *int64 { return &c.MaxMessageBytes })},
	{Name: "message.timestamp.after.max.ms", Type: ConfigLong, Default: "3600000",
		Doc: "refuse a batch whose CreateTime is this far ahead of the broker's clock",
		set: msField(0, func(c *TopicConfig) *time.Duration { return &c.TimestampAfterMax })},
	{Name: "message.timestamp.before.max.ms", Type: ConfigLong, Default: "9223372036854775807",
		Doc: "refuse a batch whose CreateTime is this far behind the broker's clock",
		set: msField(0, func(c *TopicConfig) *time.Duration { return &c.TimestampBeforeMax })},
	{Name: "message.timestamp.type", Type: ConfigString, Default: "CreateTime",
		Doc: "CreateTime (the producer's) or LogAppendTime (the broker's, at append)",
		set: func(c *TopicConfig, v string) error {
			if v != "CreateTime" && v != "LogAppendTime" {
				return fmt.Errorf("must be CreateTime or LogAppendTime")
			}
			c.TimestampType = v
			return nil
		}},
	{Name: "min.cleanable.dirty.ratio", Type: ConfigDouble, Default: "0.5",
		Doc: "compaction (stored; Sluice does not compact yet)",
		set: func(c *TopicConfig, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return fmt.Errorf("must be a number in [0, 1]")
			}
			c.MinCleanableRatio = f
			return nil
		}},
	{Name: "min.compaction.lag.ms", Type: ConfigLong, Default: "0",
		Doc: "compaction (stored; Sluice does not compact yet)",
		set: msField(0, func(c *TopicConfig) *time.Duration { return &c.MinCompactionLag })},
	{Name: "min.insync.replicas", Type: ConfigInt, Default: "1",
		Doc: "acks=all is refused while fewer replicas are in sync",
		set: longField(1, math.MaxInt32, func(c *TopicConfig) *int64 { return &c.MinInsyncReplicas })},
	{Name: "preallocate", Type: ConfigBoolean, Default: "false",
		Doc: "stored, not applied: the broker's log.preallocate.bytes reserves disk blocks ahead",
		set: boolField(func(c *TopicConfig) *bool { return &c.Preallocate })},
	{Name: "retention.bytes", Type: ConfigLong, Default: "-1",
		Doc: "most bytes a partition keeps before its oldest segments go; -1 no limit",
		set: longField(math.MinInt64, math.MaxInt64, func(c *TopicConfig) *int64 { return &c.RetentionBytes })},
	{Name: "retention.ms", Type: ConfigLong, Default: "604800000",
		Doc: "how long a segment is kept after its newest record; -1 forever",
		set: msField(-1, func(c *TopicConfig) *time.Duration { return &c.Retention })},
	// Kafka 3.x's minimum (a record overhead); small segments keep tests cheap.
	{Name: "segment.bytes", Type: ConfigInt, Default: "1073741824",
		Doc: "a segment file rolls before it would grow past this",
		set: longField(14, math.MaxInt32, func(c *TopicConfig) *int64 { return &c.SegmentBytes })},
	{Name: "segment.index.bytes", Type: ConfigInt, Default: "10485760",
		Doc: "size of each segment's offset and time index files",
		// Kafka's minimum is 4, but a segment's indexes must each hold one entry, or no broker
		// can open the topic's partitions: 12 bytes is the time index's entry (index.TimeEntrySize).
		set: longField(12, math.MaxInt32, func(c *TopicConfig) *int64 { return &c.SegmentIndexBytes })},
	{Name: "segment.jitter.ms", Type: ConfigLong, Default: "0",
		Doc: "each segment rolls a random amount up to this before segment.ms",
		set: msField(0, func(c *TopicConfig) *time.Duration { return &c.SegmentJitter })},
	{Name: "segment.ms", Type: ConfigLong, Default: "604800000",
		Doc: "a segment rolls once its first record is this old",
		set: msField(1, func(c *TopicConfig) *time.Duration { return &c.SegmentTime })},
	{Name: "unclean.leader.election.enable", Type: ConfigBoolean, Default: "false",
		Doc: "stored; there is no replication yet, so no election to make",
		set: boolField(func(c *TopicConfig) *bool { return &c.UncleanLeaderElect })},
	{Name: "write.caching", Type: ConfigBoolean, Default: "false",
		Doc: "Redpanda's name: false = acks=all is answered only after fsync",
		set: boolField(func(c *TopicConfig) *bool { return &c.WriteCaching })},
}

// TopicConfigDefs returns the known topic config keys, sorted by name.
func TopicConfigDefs() []TopicConfigDef { return slices.Clone(topicConfigDefs) }

// LookupTopicConfig returns the definition of a topic config key.
func LookupTopicConfig(name string) (TopicConfigDef, bool) {
	i, ok := slices.BinarySearchFunc(topicConfigDefs, name, func(d TopicConfigDef, n string) int {
		return strings.Compare(d.Name, n)
	})
	if !ok {
		return TopicConfigDef{}, false
	}
	return topicConfigDefs[i], true
}

// DefaultTopicConfig returns Kafka's defaults, parsed from the registry's
// default strings so that the two cannot drift apart.
func DefaultTopicConfig() TopicConfig {
	var c TopicConfig
	for _, d := range topicConfigDefs {
		if err := d.set(&c, d.Default); err != nil {
			panic(fmt.Sprintf("cluster: bad default for %s: %v", d.Name, err))
		}
	}
	return c
}

// ResolveTopicConfig applies a topic's overrides to defaults (normally the
// broker's configured defaults, themselves starting from DefaultTopicConfig).
// Keys are applied in sorted order so the first error reported is
// deterministic. Errors wrap ErrInvalidConfig and name the key.
func ResolveTopicConfig(overrides map[string]string, defaults TopicConfig) (TopicConfig, error) {
	c := defaults
	for _, k := range sortedKeys(overrides) {
		if err := setTopicConfig(&c, k, overrides[k]); err != nil {
			return TopicConfig{}, err
		}
	}
	if err := checkCompactionLags(c); err != nil {
		return TopicConfig{}, err
	}
	return c, nil
}

// checkCompactionLags checks the one rule that ties two configs together.
func checkCompactionLags(c TopicConfig) error {
	if c.MinCompactionLag > c.MaxCompactionLag {
		return fmt.Errorf("%w: min.compaction.lag.ms %v exceeds max.compaction.lag.ms %v",
			ErrInvalidConfig, c.MinCompactionLag, c.MaxCompactionLag)
	}
	return nil
}

// ValidateTopicConfigs checks that every key is known and every value parses
// and is in range, and that min.compaction.lag.ms does not exceed
// max.compaction.lag.ms when both are set (a topic with such overrides could
// not be opened by any broker). It does not depend on broker defaults, so the
// state machine can run it deterministically.
func ValidateTopicConfigs(overrides map[string]string) error {
	var c TopicConfig
	for _, k := range sortedKeys(overrides) {
		if err := setTopicConfig(&c, k, overrides[k]); err != nil {
			return err
		}
	}
	_, hasMin := overrides["min.compaction.lag.ms"]
	_, hasMax := overrides["max.compaction.lag.ms"]
	if hasMin && hasMax {
		return checkCompactionLags(c)
	}
	return nil
}

// CheckMinInsyncReplicas refuses a topic's own min.insync.replicas override above its
// replication factor (rf: the fewest replicas of any of its partitions): no acks=all produce
// could ever be accepted. As Kafka, only the topic's setting is checked, when it is created or
// altered: the broker-wide default applies to topics of every replication factor (a default of
// 2 leaves an RF 1 topic unable to take acks=all, as in Kafka, rather than unable to exist).
// overrides must have passed ValidateTopicConfigs.
func CheckMinInsyncReplicas(overrides map[string]string, rf int) error {
	v, ok := overrides["min.insync.replicas"]
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= int64(rf) {
		return nil // ValidateTopicConfigs reports what does not parse
	}
	return fmt.Errorf("%w: min.insync.replicas %d is greater than the replication factor %d", ErrInvalidConfig, n, rf)
}

// replicationFactor is the fewest replicas of any partition of an assignment (0 for none).
func replicationFactor(partitions [][]int32) int {
	rf := 0
	for i, r := range partitions {
		if i == 0 || len(r) < rf {
			rf = len(r)
		}
	}
	return rf
}

func setTopicConfig(c *TopicConfig, key, value string) error {
	d, ok := LookupTopicConfig(key)
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, key)
	}
	if err := d.set(c, value); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, key, value, err)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// parseLong parses as Kafka does: surrounding whitespace is ignored.
func parseLong(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not an integer")
	}
	if n < lo || n > hi {
		if hi == math.MaxInt64 {
			return 0, fmt.Errorf("must be at least %d", lo)
		}
		return 0, fmt.Errorf("must be in [%d, %d]", lo, hi)
	}
	return n, nil
}

func longField(lo, hi int64, field func(*TopicConfig) *int64) func(*TopicConfig, string) error {
	return func(c *TopicConfig, v string) error {
		n, err := parseLong(v, lo, hi)
		if err != nil {
			return err
		}
		*field(c) = n
		return nil
	}
}

// msField parses a Kafka LONG of milliseconds into a Duration, saturating
// at Forever instead of overflowing.
func msField(lo int64, field func(*TopicConfig) *time.Duration) func(*TopicConfig, string) error {
	return func(c *TopicConfig, v string) error {
		ms, err := parseLong(v, lo, math.MaxInt64)
		if err != nil {
			return err
		}
		*field(c) = msToDuration(ms)
		return nil
	}
}

func msToDuration(ms int64) time.Duration {
	if ms > int64(Forever/time.Millisecond) {
		return Forever
	}
	return time.Duration(ms) * time.Millisecond
}

// boolField parses as Kafka does: "true" or "false", any case, trimmed.
func boolField(field func(*TopicConfig) *bool) func(*TopicConfig, string) error {
	return func(c *TopicConfig, v string) error {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			*field(c) = true
		case "false":
			*field(c) = false
		default:
			return fmt.Errorf("must be true or false")
		}
		return nil
	}
}
