package broker

import (
	"math"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/index"
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
		// the edges of the numeric ranges, and values just outside them
		"log.segment.bytes=14\nlog.index.size.max.bytes=12\nlog.index.interval.bytes=1\nmessage.max.bytes=1\n",
		"log.retention.check.interval.ms=1\nlog.roll.ms=1\nlog.flush.interval.messages=1\nconnections.max.idle.ms=-1\n",
		"log.retention.bytes=-9223372036854775808\nshared.memory.max.bytes=-1\nlog.preallocate.bytes=1\n",
		"log.segment.bytes=13", "log.index.size.max.bytes=11", "log.roll.jitter.ms=-1", "log.roll.jitter.hours=3", "log.retention.ms=0", "log.retention.bytes=0",
		"connections.max.idle.ms=0", "log.writeback.bytes=0", "message.max.bytes=-1", "log.retention.hours=-2",
		// the cluster's keys (issue #22), good and bad
		"node.id=0\nprocess.roles=broker,controller\ncontroller.quorum.voters=0@127.0.0.1:9093,1@127.0.0.1:9193\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\n",
		"node.id=2\nprocess.roles=controller\ncontroller.quorum.voters=2@h:9\nlisteners=CONTROLLER://h:9\n",
		"node.id=4\nprocess.roles=broker\ncontroller.quorum.voters=0@h:9\nadvertised.listeners=PLAINTEXT://b:1,CONTROLLER://b:2\n",
		"controller.listener.names=RAFT\nlisteners=PLAINTEXT://:1,RAFT://:2\nlistener.security.protocol.map=RAFT:PLAINTEXT,SSL:SSL\n",
		"broker.heartbeat.interval.ms=100\nbroker.session.timeout.ms=101\ncontrolled.shutdown.enable=false\n",
		"num.io.threads=8\nlog.retention.hour=1\n", "listeners=SSL://:9093", "process.roles=broker,broker",
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
		// Durations: dur turns -1 or an overflowing count into cluster.Forever.
		for name, d := range map[string]time.Duration{
			"log.roll": c.SegmentMs, "log.roll.jitter": c.SegmentJitter, "log.retention": c.RetentionMs, "log.retention.check.interval.ms": c.RetentionCheck,
			"log.flush.interval.ms": c.FlushMs, "connections.max.idle.ms": c.IdleTimeout,
		} {
			if d < 0 {
				t.Fatalf("%s parsed to the negative duration %v", name, d)
			}
		}
		// listeners: only host:port addresses; no client listener only on a controller-only node.
		for _, a := range []string{c.Listen, c.ControllerListen, c.AdvertisedListen} {
			if _, _, err := net.SplitHostPort(a); err != nil && a != "" {
				t.Fatalf("a listener parsed to %q: %v", a, err)
			}
		}
		if c.Listen == "" && c.Roles.Broker() {
			t.Fatalf("no PLAINTEXT listener on a node with roles %s", c.Roles)
		}
		// The whole-file checks held: a controller is a voter with a controller listener, a
		// broker-only node is not a voter, and the heartbeat is within the session timeout.
		if len(c.Voters) > 0 {
			voter := slices.ContainsFunc(c.Voters, func(v cluster.Voter) bool { return v.ID == c.NodeID })
			if !c.NodeIDSet || voter != c.Roles.Controller() || (voter && c.ControllerListen == "") {
				t.Fatalf("node %d (set %v, roles %s, controller listener %q) against voters %v", c.NodeID, c.NodeIDSet, c.Roles, c.ControllerListen, c.Voters)
			}
		}
		if c.HeartbeatInterval >= c.SessionTimeout {
			t.Fatalf("heartbeat %v not within the session timeout %v", c.HeartbeatInterval, c.SessionTimeout)
		}

		// What Open does with it (withDefaults): every value the file set is kept. A zero (or, for
		// a size or count, a negative) value it replaced would have been a silent default.
		d := c.withDefaults()
		kept := d
		kept.Logger = nil // withDefaults also sets a logger
		if !reflect.DeepEqual(kept, c) {
			t.Fatalf("withDefaults changed a parsed value:\n%+v\nto\n%+v", c, kept)
		}
		// The broker-wide topic defaults are valid topic configs (as the topic-level rule would
		// hold them: Forever is Long.MAX_VALUE ms, except retention.ms's -1).
		ms := func(d time.Duration, forever string) string {
			if d == cluster.Forever {
				return forever
			}
			return strconv.FormatInt(d.Milliseconds(), 10)
		}
		maxLong := strconv.FormatInt(math.MaxInt64, 10)
		td := d.topicDefaults()
		if err := cluster.ValidateTopicConfigs(map[string]string{
			"segment.bytes": strconv.FormatInt(td.SegmentBytes, 10), "max.message.bytes": strconv.FormatInt(td.MaxMessageBytes, 10),
			"index.interval.bytes": strconv.FormatInt(td.IndexIntervalBytes, 10), "segment.index.bytes": strconv.FormatInt(td.SegmentIndexBytes, 10),
			"flush.messages": strconv.FormatInt(td.FlushMessages, 10), "retention.bytes": strconv.FormatInt(td.RetentionBytes, 10),
			"retention.ms": ms(td.Retention, "-1"), "segment.ms": ms(td.SegmentTime, maxLong), "flush.ms": ms(td.FlushInterval, maxLong),
			"segment.jitter.ms": ms(td.SegmentJitter, maxLong),
		}); err != nil {
			t.Fatalf("broker-wide topic defaults %+v: %v", td, err)
		}
		// A writable index (segment.index.bytes) must hold one entry of each index, or Open fails.
		if d.IndexMaxBytes < max(index.OffsetEntrySize, index.TimeEntrySize) {
			t.Fatalf("log.index.size.max.bytes %d parsed: it holds no index entry", d.IndexMaxBytes)
		}
		// And the checks Open then applies regardless of what the cluster holds.
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
