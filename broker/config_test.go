package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/cluster"
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
	want.NodeID, want.DataDir, want.Listen, want.NumPartitions = 3, "/var/lib/sluice", "0.0.0.0:19092", 6
	want.MessageMaxBytes, want.RetentionMs, want.RetentionBytes = 2<<20, 48*time.Hour, -1
	want.FlushMs, want.AutoCreateTopics, want.WriteCaching = cluster.Forever, true, true
	want.WritebackBytes, want.PreallocateBytes = -1, 16<<20
	if c != want {
		t.Fatalf("parsed\n%+v\nwant\n%+v", c, want)
	}
	for _, bad := range []string{"no.such.property=1", "num.partitions=many", "listeners=nonsense", "justakey",
		// Counts the broker narrows later: refused rather than wrapped or taken as the default.
		"node.id=4294967297", "node.id=-1", "node.id=0", "broker.id= 0", "node.id=00", "num.partitions=2170000000", "num.partitions=0",
		"default.replication.factor=70000", "offsets.topic.num.partitions=4294967296", "socket.request.max.bytes=-5"} {
		c := DefaultConfig()
		if err := ParseProperties(strings.NewReader(bad), &c); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
