package broker

import (
	"net"
	"strings"
	"testing"
	"time"
)

// FuzzParseProperties: a properties file is user input (serve --config). ParseProperties must
// return an error for what it cannot use, never panic, and a file it accepts must not leave
// the broker with a value that Open then rejects or silently changes.
func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{
		sampleProperties,
		"broker.id=0\nlog.dir=data\nlisteners=PLAINTEXT://127.0.0.1:9092,PLAINTEXT://[::1]:9093\n",
		"unix.socket.path=-\nsocket.request.max.bytes=104857600\noffsets.topic.num.partitions=50\n",
		"default.replication.factor=1\nlog.segment.bytes=1073741824\nlog.roll.ms=604800000\nlog.roll.hours=168\n",
		"log.retention.ms=-1\nlog.retention.minutes=10\nlog.retention.check.interval.ms=300000\n",
		"log.flush.interval.messages=9223372036854775807\nlog.index.interval.bytes=4096\nlog.index.size.max.bytes=10485760\n",
		"write_caching_default=false\nshared.memory.max.bytes=67108864\nconnections.max.idle.ms=600000\n",
		"! bang comment\n  # indented comment\n\n",
		"log.retention.hours=9223372036854775807\n",
		// the largest values the broker's narrower types hold
		"node.id=2147483647\noffsets.topic.num.partitions=2147483647\n",
		"num.partitions=2147483647\ndefault.replication.factor=32767\n",
		// broken variants (TestParseProperties' rejects among them)
		"no.such.property=1", "num.partitions=many", "listeners=nonsense", "justakey",
		"node.id=", "=3", "log.roll.ms=1e3", "auto.create.topics.enable=yes",
		"log.segment.bytes=99999999999999999999", "listeners=PLAINTEXT://", "log.dirs=,x",
		"node.id=3\r\nnum.partitions=2\r\n", "key\x00=value",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var zero Config
		_ = ParseProperties(strings.NewReader(in), &zero) // from a zero Config too: no panic

		c := DefaultConfig()
		if err := ParseProperties(strings.NewReader(in), &c); err != nil {
			return
		}
		// Durations: dur turns a negative or overflowing count into cluster.Forever.
		for name, d := range map[string]time.Duration{
			"log.roll": c.SegmentMs, "log.retention": c.RetentionMs, "log.retention.check.interval.ms": c.RetentionCheck,
			"log.flush.interval.ms": c.FlushMs, "connections.max.idle.ms": c.IdleTimeout,
		} {
			if d < 0 {
				t.Fatalf("%s parsed to the negative duration %v", name, d)
			}
		}
		// listeners: parseListener keeps only a host:port.
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			t.Fatalf("listeners parsed to %q: %v", c.Listen, err)
		}

		// What Open does with it (withDefaults), and the checks Open then applies regardless of
		// what the cluster holds.
		d := c.withDefaults()
		for name, v := range map[string]int64{
			"num.partitions": int64(d.NumPartitions), "default.replication.factor": int64(d.DefaultReplication),
			"message.max.bytes": d.MessageMaxBytes, "socket.request.max.bytes": int64(d.SocketRequestMaxBytes),
			"offsets.topic.num.partitions": int64(d.OffsetsTopicPartitions), "log.segment.bytes": d.SegmentBytes,
			"log.flush.interval.messages": d.FlushMessages, "log.index.interval.bytes": d.IndexIntervalBytes,
			"log.index.size.max.bytes": d.IndexMaxBytes,
		} {
			if v <= 0 {
				t.Fatalf("%s is %d after withDefaults: the broker needs it positive", name, v)
			}
		}
		if d.DataDir == "" || (d.Listen == "" && d.unixPath() == "") {
			t.Fatalf("no data directory or no listener after withDefaults: %+v", d)
		}
		// cluster.Open refuses a negative node id.
		if d.NodeID < 0 {
			t.Fatalf("node id %d parsed: Open refuses it (cluster: node id is negative)", d.NodeID)
		}
		// Open creates the offsets topic with int32(OffsetsTopicPartitions) partitions
		// (offsets.go), topic auto-creation narrows NumPartitions to int32 and DefaultReplication
		// to int16 (admin.go): a count that does not survive that becomes another number.
		if int64(int32(d.OffsetsTopicPartitions)) != int64(d.OffsetsTopicPartitions) ||
			int64(int32(d.NumPartitions)) != int64(d.NumPartitions) ||
			int64(int16(d.DefaultReplication)) != int64(d.DefaultReplication) {
			t.Fatalf("counts out of range parsed: offsets.topic.num.partitions %d, num.partitions %d, default.replication.factor %d",
				d.OffsetsTopicPartitions, d.NumPartitions, d.DefaultReplication)
		}
	})
}
