package broker

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
)

// sampleProperties is a Kafka-style file with the forms ParseProperties accepts (also a fuzz
// seed).
const sampleProperties = `
# a Kafka-style file
node.id=3
log.dirs=/var/lib/sluice,/ignored
listeners=PLAINTEXT://0.0.0.0:19092
num.partitions = 6
message.max.bytes: 2097152
log.retention.hours=48
log.retention.bytes=-1
log.flush.interval.ms=-1
auto.create.topics.enable=true
write.caching.default=true
log.writeback.bytes=-1
log.preallocate.bytes=16777216
`

func TestParseProperties(t *testing.T) {
	c := DefaultConfig()
	if err := ParseProperties(strings.NewReader(sampleProperties), &c); err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.NodeID, want.NodeIDSet, want.DataDir, want.Listen, want.NumPartitions = 3, true, "/var/lib/sluice", "0.0.0.0:19092", 6
	want.MessageMaxBytes, want.RetentionMs, want.RetentionBytes = 2<<20, 48*time.Hour, -1
	want.FlushMs, want.AutoCreateTopics, want.WriteCaching = cluster.Forever, true, true
	want.WritebackBytes, want.PreallocateBytes = -1, 16<<20
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", c, want)
	}
	for _, bad := range []string{"no.such.property=1", "num.partitions=many", "listeners=nonsense", "justakey",
		// Counts the broker narrows later: refused rather than wrapped or taken as the default.
		"node.id=4294967297", "node.id=-1", "broker.id=-3", "num.partitions=2170000000", "num.partitions=0",
		"default.replication.factor=70000", "offsets.topic.num.partitions=4294967296", "socket.request.max.bytes=-5",
		// An empty first directory would silently become ./data.
		"log.dirs=", "log.dirs=,/var/lib/sluice"} {
		c := DefaultConfig()
		if err := ParseProperties(strings.NewReader(bad), &c); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Values out of range: refused with an error naming the key, the value and the range (or
	// why a 0 Kafka accepts is not supported), never silently taken as the default (withDefaults
	// replaces a zero field, and a negative size or count) nor accepted to fail later.
	for _, bad := range []struct{ in, want string }{
		{"log.segment.bytes=0", "[14, 2147483647]"},
		{"log.segment.bytes=1", "[14, 2147483647]"}, // every produce failed with RECORD_LIST_TOO_LARGE
		{"log.segment.bytes=13", "[14, 2147483647]"},
		{"log.segment.bytes=2147483648", "[14, 2147483647]"},
		{"message.max.bytes=-1", "[1, 2147483647]"},
		{"message.max.bytes=0", "[1, 2147483647]"},
		{"message.max.bytes=2147483648", "[1, 2147483647]"},
		{"log.index.size.max.bytes=0", "[12, 2147483647]"},
		{"log.index.size.max.bytes=1", "[12, 2147483647]"}, // startup failed deep in the index package
		{"log.index.size.max.bytes=4", "[12, 2147483647]"}, // Kafka's minimum, too small for a time index entry
		{"log.index.size.max.bytes=11", "[12, 2147483647]"},
		{"log.index.size.max.bytes=2147483648", "[12, 2147483647]"},
		{"log.index.interval.bytes=0", "not supported"},
		{"log.index.interval.bytes=-1", "[1, 2147483647]"},
		{"log.index.interval.bytes=2147483648", "[1, 2147483647]"},
		{"log.retention.check.interval.ms=0", "[1, ...]"},
		{"log.retry.backoff.ms=0", "[1, ...]"},
		{"log.retention.check.interval.ms=-1", "[1, ...]"},
		{"log.retention.ms=0", "not supported"},
		{"log.retention.ms=-2", "-1 or [1, ...]"},
		{"log.retention.minutes=0", "not supported"},
		{"log.retention.hours=0", "not supported"},
		{"log.retention.hours=-2", "-1 or [1, 2147483647]"},
		{"log.retention.hours=2147483648", "-1 or [1, 2147483647]"},
		{"log.retention.bytes=0", "not supported"},
		{"log.roll.ms=0", "[1, ...]"},
		{"log.roll.ms=-1", "[1, ...]"},
		{"log.roll.hours=0", "[1, 2147483647]"},
		{"log.roll.hours=-1", "[1, 2147483647]"},
		{"log.roll.jitter.ms=-1", "[0, ...]"},
		{"log.roll.jitter.hours=-1", "[0, 2147483647]"},
		{"log.flush.interval.messages=0", "[1, ...]"},
		{"log.flush.interval.messages=-1", "[1, ...]"},
		{"log.flush.interval.ms=0", "not supported"},
		{"log.flush.interval.ms=-2", "-1 or [1, ...]"},
		{"connections.max.idle.ms=0", "not supported"},
		{"connections.max.idle.ms=-2", "-1 or [1, ...]"},
		{"log.writeback.bytes=0", "not supported"},
		{"log.writeback.bytes=-2", "-1 or [1, ...]"},
		{"log.preallocate.bytes=0", "not supported"},
		{"log.max.open.files=-1", "[0, 2147483647]"},
		{"shared.memory.max.bytes=0", "not supported"},
		{"shared.memory.max.bytes=-2", "-1 or [1, ...]"},
		{"storage.space.alert.free.bytes=-1", "[0, ...]"},
		{"storage.space.alert.free.percent=0", "not supported"},
		{"storage.space.alert.free.percent=101", "-1 or [1, 100]"},
		{"storage.space.min.free.bytes=0", "not supported"},
		{"storage.space.min.free.bytes=-2", "-1 or [1, ...]"},
		{"storage.ballast.bytes=0", "not supported"},
	} {
		c := DefaultConfig()
		err := ParseProperties(strings.NewReader(bad.in), &c)
		if err == nil {
			t.Errorf("%q accepted: %+v", bad.in, c)
			continue
		}
		key, value, _ := strings.Cut(bad.in, "=")
		for _, want := range []string{key + ": " + value + " ", bad.want} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %q does not say %q", bad.in, err, want)
			}
		}
	}

	// The edges of each range are accepted, and survive withDefaults unchanged.
	for _, good := range []struct {
		in  string
		set func(c *Config)
	}{
		{"node.id=1", func(c *Config) { c.NodeID, c.NodeIDSet = 1, true }},
		{"node.id=0", func(c *Config) { c.NodeID, c.NodeIDSet = 0, true }}, // 0 is a node id, as in Kafka
		{"broker.id= 0", func(c *Config) { c.NodeID, c.NodeIDSet = 0, true }},
		{"num.partitions=1", func(c *Config) { c.NumPartitions = 1 }},
		{"default.replication.factor=1", func(c *Config) { c.DefaultReplication = 1 }},
		{"message.max.bytes=1", func(c *Config) { c.MessageMaxBytes = 1 }},
		{"message.max.bytes=2147483647", func(c *Config) { c.MessageMaxBytes = math.MaxInt32 }},
		{"socket.request.max.bytes=1", func(c *Config) { c.SocketRequestMaxBytes = 1 }},
		{"offsets.topic.num.partitions=1", func(c *Config) { c.OffsetsTopicPartitions = 1 }},
		{"log.segment.bytes=14", func(c *Config) { c.SegmentBytes = 14 }},
		{"log.segment.bytes=2147483647", func(c *Config) { c.SegmentBytes = math.MaxInt32 }},
		{"log.roll.ms=1", func(c *Config) { c.SegmentMs = time.Millisecond }},
		{"log.roll.ms=9223372036854775807", func(c *Config) { c.SegmentMs = cluster.Forever }},
		{"log.roll.hours=1", func(c *Config) { c.SegmentMs = time.Hour }},
		{"log.roll.jitter.ms=0", func(c *Config) { c.SegmentJitter = 0 }},
		{"log.roll.jitter.ms=1500", func(c *Config) { c.SegmentJitter = 1500 * time.Millisecond }},
		{"log.roll.jitter.hours=2", func(c *Config) { c.SegmentJitter = 2 * time.Hour }},
		{"log.retention.ms=-1", func(c *Config) { c.RetentionMs = cluster.Forever }},
		{"log.retention.ms=1", func(c *Config) { c.RetentionMs = time.Millisecond }},
		{"log.retention.minutes=-1", func(c *Config) { c.RetentionMs = cluster.Forever }},
		{"log.retention.minutes=1", func(c *Config) { c.RetentionMs = time.Minute }},
		{"log.retention.hours=-1", func(c *Config) { c.RetentionMs = cluster.Forever }},
		{"log.retention.hours=1", func(c *Config) { c.RetentionMs = time.Hour }},
		{"log.retention.hours=2147483647", func(c *Config) { c.RetentionMs = cluster.Forever }},
		{"log.retention.bytes=-9223372036854775808", func(c *Config) { c.RetentionBytes = math.MinInt64 }},
		{"log.retention.bytes=1", func(c *Config) { c.RetentionBytes = 1 }},
		{"log.retention.check.interval.ms=1", func(c *Config) { c.RetentionCheck = time.Millisecond }},
		{"log.retry.backoff.ms=250", func(c *Config) { c.LogRetryBackoff = 250 * time.Millisecond }},
		{"log.retry.backoff.max.ms=30000", func(c *Config) { c.LogRetryBackoffMax = 30 * time.Second }},
		{"log.flush.interval.messages=1", func(c *Config) { c.FlushMessages = 1 }},
		{"log.flush.interval.ms=1", func(c *Config) { c.FlushMs = time.Millisecond }},
		{"log.index.interval.bytes=1", func(c *Config) { c.IndexIntervalBytes = 1 }},
		{"log.index.interval.bytes=2147483647", func(c *Config) { c.IndexIntervalBytes = math.MaxInt32 }},
		{"log.index.size.max.bytes=12", func(c *Config) { c.IndexMaxBytes = 12 }},
		{"log.index.size.max.bytes=2147483647", func(c *Config) { c.IndexMaxBytes = math.MaxInt32 }},
		{"log.writeback.bytes=1", func(c *Config) { c.WritebackBytes = 1 }},
		{"log.preallocate.bytes=-1", func(c *Config) { c.PreallocateBytes = -1 }},
		{"log.preallocate.bytes=1", func(c *Config) { c.PreallocateBytes = 1 }},
		{"log.max.open.files=0", func(c *Config) { c.MaxOpenFiles = 0 }},
		{"log.max.open.files=5000", func(c *Config) { c.MaxOpenFiles = 5000 }},
		{"shared.memory.max.bytes=-1", func(c *Config) { c.SharedMemoryBytes = -1 }},
		{"shared.memory.max.bytes=1", func(c *Config) { c.SharedMemoryBytes = 1 }},
		{"storage.space.alert.free.bytes=0", func(c *Config) {}}, // Redpanda's 0: the percent alone
		{"storage.space.alert.free.bytes=1073741824", func(c *Config) { c.SpaceAlertFreeBytes = 1 << 30 }},
		{"storage.space.alert.free.percent=-1", func(c *Config) { c.SpaceAlertFreePercent = -1 }},
		{"storage.space.alert.free.percent=100", func(c *Config) { c.SpaceAlertFreePercent = 100 }},
		{"storage.space.min.free.bytes=-1", func(c *Config) { c.SpaceMinFreeBytes = -1 }},
		{"storage.space.min.free.bytes=1", func(c *Config) { c.SpaceMinFreeBytes = 1 }},
		{"storage.ballast.bytes=-1", func(c *Config) { c.BallastBytes = -1 }},
		{"storage.ballast.bytes=1", func(c *Config) { c.BallastBytes = 1 }},
		{"connections.max.idle.ms=-1", func(c *Config) { c.IdleTimeout = cluster.Forever }},
		{"connections.max.idle.ms=1", func(c *Config) { c.IdleTimeout = time.Millisecond }},
		// A property in several units takes Kafka's order, not the file's: the finer unit wins.
		{"log.retention.ms=5000\nlog.retention.hours=2", func(c *Config) { c.RetentionMs = 5 * time.Second }},
		{"log.retention.minutes=3\nlog.retention.hours=2", func(c *Config) { c.RetentionMs = 3 * time.Minute }},
		{"log.retention.hours=2\nlog.retention.ms=5000\nlog.retention.minutes=3", func(c *Config) { c.RetentionMs = 5 * time.Second }},
		{"log.roll.ms=7\nlog.roll.hours=1", func(c *Config) { c.SegmentMs = 7 * time.Millisecond }},
		{"log.roll.jitter.ms=10\nlog.roll.jitter.hours=1", func(c *Config) { c.SegmentJitter = 10 * time.Millisecond }},
	} {
		c := DefaultConfig()
		if err := ParseProperties(strings.NewReader(good.in), &c); err != nil {
			t.Errorf("%q: %v", good.in, err)
			continue
		}
		want := DefaultConfig()
		good.set(&want)
		if !reflect.DeepEqual(c, want) {
			t.Errorf("%q parsed\n%+v\nwant\n%+v", good.in, c, want)
		}
		d := c.withDefaults()
		d.Logger = nil // withDefaults also sets a logger
		if !reflect.DeepEqual(d, c) {
			t.Errorf("%q: withDefaults changed it\n%+v\nto\n%+v", good.in, c, d)
		}
	}
}

// TestSmallestIndexesServe: the smallest log.index.size.max.bytes (one entry of each index)
// and log.index.interval.bytes (an entry for every batch) start a broker that serves, where
// log.index.size.max.bytes=1 once failed its startup.
func TestSmallestIndexesServe(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	if err := ParseProperties(strings.NewReader("log.index.size.max.bytes=12\nlog.index.interval.bytes=1\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)
	values := []string{"a", "b", "c", "d"}
	for i, v := range values {
		if res := produce(t, c, "t", 0, wire.AcksAll, records(t, v)); res.ErrorCode != wire.NoError || res.BaseOffset != int64(i) {
			t.Fatalf("produce %d: %+v", i, res)
		}
	}
	for from := range values {
		got := fetchP(t, c, "t", 0, int64(from), 0, 1)
		if vs := fetchedValues(t, got.Records); got.ErrorCode != wire.NoError || len(vs) == 0 || vs[0] != values[from] {
			t.Errorf("fetch from %d: %v, values %q", from, got.ErrorCode, vs)
		}
	}
}
