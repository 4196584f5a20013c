package broker

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/cluster"
)

// TestKRaftQuickStart: the server.properties of Kafka's KRaft quick starts (3.x's
// config/kraft/server.properties, 4.x's config/server.properties) are taken as a whole: the
// keys Sluice knows parse to the file's values, and the Kafka keys with no effect in Sluice
// come back once each, to be listed in one log line, instead of being refused one by one.
func TestKRaftQuickStart(t *testing.T) {
	for _, tc := range []struct {
		file    string
		voters  []cluster.Voter
		advCtrl string   // advertised.listeners' CONTROLLER entry
		extra   []string // ignored beyond the keys both files have
	}{
		{"kraft-server.properties", []cluster.Voter{{ID: 1, Host: "localhost", Port: 9093}}, "", nil},
		{"server-4.properties", nil, "localhost:9093", []string{"share.coordinator.state.topic.min.isr", "share.coordinator.state.topic.replication.factor"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			c := DefaultConfig()
			ignored, err := ReadProperties(f, &c)
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultConfig()
			want.NodeID, want.NodeIDSet, want.Voters = 1, true, tc.voters
			want.Listen, want.ControllerListen, want.AdvertisedListen = ":9092", ":9093", "localhost:9092"
			want.AdvertisedControllerListen = tc.advCtrl
			want.DataDir = "/tmp/kraft-combined-logs"
			want.OffsetsTopicReplication = 1 // the quick start's single-node setting
			if !reflect.DeepEqual(c, want) {
				t.Errorf("parsed\n%+v\nwant\n%+v", c, want)
			}
			wantIgnored := slices.Sorted(slices.Values(append([]string{
				"num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir",
				"socket.receive.buffer.bytes", "socket.send.buffer.bytes", "transaction.state.log.min.isr",
				"transaction.state.log.replication.factor"}, tc.extra...)))
			if !slices.Equal(ignored, wantIgnored) {
				t.Errorf("ignored %q\nwant    %q", ignored, wantIgnored)
			}
		})
	}
}

// TestClusterProperties: the cluster's keys parse to the Config fields the cluster code reads,
// with Kafka's formats, and every bad value (or combination, checked once the whole file is
// read) is refused with a message that names it.
func TestClusterProperties(t *testing.T) {
	voters3 := "controller.quorum.voters=0@127.0.0.1:9093,1@127.0.0.1:9193,2@127.0.0.1:9293\n"
	three := []cluster.Voter{{ID: 0, Host: "127.0.0.1", Port: 9093}, {ID: 1, Host: "127.0.0.1", Port: 9193}, {ID: 2, Host: "127.0.0.1", Port: 9293}}
	for _, good := range []struct {
		in  string
		set func(c *Config)
	}{
		// Node 1 of the three-node quorum, combined mode.
		{"node.id=1\n" + voters3 + "listeners=PLAINTEXT://127.0.0.1:9192,CONTROLLER://127.0.0.1:9193\n", func(c *Config) {
			c.NodeID, c.NodeIDSet, c.Voters, c.Listen, c.ControllerListen = 1, true, three, "127.0.0.1:9192", "127.0.0.1:9193"
		}},
		// Node 0 is a node id; the listener names in either case and order.
		{"node.id=0\n" + voters3 + "listeners=controller://:9093,plaintext://:9092\nprocess.roles=controller, broker\n", func(c *Config) {
			c.NodeID, c.NodeIDSet, c.Voters, c.Listen, c.ControllerListen = 0, true, three, ":9092", ":9093"
		}},
		// A broker-only node, not a voter, with no controller listener.
		{"node.id=3\nprocess.roles=broker\n" + voters3 + "listeners=PLAINTEXT://127.0.0.1:9392\nadvertised.listeners=PLAINTEXT://broker3.example:9392\n", func(c *Config) {
			c.NodeID, c.NodeIDSet, c.Roles, c.Voters, c.Listen, c.AdvertisedListen = 3, true, RoleBroker, three, "127.0.0.1:9392", "broker3.example:9392"
		}},
		// Both listeners behind a proxy: the voters name the advertised CONTROLLER address.
		{"node.id=1\n" + voters3 + "listeners=PLAINTEXT://127.0.0.1:19192,CONTROLLER://127.0.0.1:19193\nadvertised.listeners=PLAINTEXT://127.0.0.1:9192,CONTROLLER://127.0.0.1:9193\n", func(c *Config) {
			c.NodeID, c.NodeIDSet, c.Voters, c.Listen, c.ControllerListen = 1, true, three, "127.0.0.1:19192", "127.0.0.1:19193"
			c.AdvertisedListen, c.AdvertisedControllerListen = "127.0.0.1:9192", "127.0.0.1:9193"
		}},
		// A controller-only node: no client listener.
		{"node.id=2\nprocess.roles=controller\n" + voters3 + "listeners=CONTROLLER://127.0.0.1:9293\n", func(c *Config) {
			c.NodeID, c.NodeIDSet, c.Roles, c.Voters, c.Listen, c.ControllerListen = 2, true, RoleController, three, "", "127.0.0.1:9293"
		}},
		// Another controller listener name, set after listeners in the file.
		{"listeners=PLAINTEXT://:9092,RAFT://:9093\ncontroller.listener.names=RAFT\nlistener.security.protocol.map=RAFT:PLAINTEXT,PLAINTEXT:PLAINTEXT\n", func(c *Config) {
			c.Listen, c.ControllerListen, c.ControllerListenerName = ":9092", ":9093", "RAFT"
		}},
		{"broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=2000\n", func(c *Config) {
			c.HeartbeatInterval, c.SessionTimeout = 500*time.Millisecond, 2*time.Second
		}},
		{"controlled.shutdown.enable=false", func(c *Config) { c.DisableControlledShutdown = true }},
		{"controlled.shutdown.enable=true", func(c *Config) {}},
		{"unclean.leader.election.enable=true", func(c *Config) { c.UncleanLeaderElection = true }},
		{"default.replication.factor=3", func(c *Config) { c.DefaultReplication = 3 }},
		{"node.id=1\nnode.id=2\nbroker.id=2", func(c *Config) { c.NodeID, c.NodeIDSet = 2, true }}, // the last line of a key wins
		{"process.roles=broker,controller", func(c *Config) {}},                                    // the zero Roles: combined
		{"inter.broker.listener.name=PLAINTEXT\nsecurity.inter.broker.protocol=PLAINTEXT", func(c *Config) {}},
		{"listeners=127.0.0.1:9092", func(c *Config) {}}, // Sluice's older form: PLAINTEXT
		{"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", func(c *Config) { // ports the system picks
			c.Listen, c.ControllerListen = "127.0.0.1:0", "127.0.0.1:0"
		}},
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
	}
	if c := DefaultConfig(); c.topicDefaults().UncleanLeaderElect {
		t.Error("unclean leader election on by default")
	} else if c.UncleanLeaderElection = true; !c.topicDefaults().UncleanLeaderElect {
		t.Error("unclean.leader.election.enable=true is not the topics' default")
	}

	for _, bad := range []struct{ in, want string }{
		{"node.id=-1", "node.id: -1 is out of range [0, 2147483647]"},
		{"node.id=1\nbroker.id=2", "broker.id=2, but the node's id is already 1"},
		{"process.roles=worker", `process.roles: "worker": want broker, controller or broker,controller`},
		{"process.roles=broker,broker", "names broker twice"},
		{"process.roles=", `process.roles: ""`},
		{"process.roles=broker", "process.roles=broker needs controller.quorum.voters"},
		{"controller.quorum.voters=0@127.0.0.1:9093,0@127.0.0.1:9193", "node id 0 is named twice"},
		{"controller.quorum.voters=nonsense", `"nonsense": want id@host:port`},
		// Voters against the node's id and roles, whatever the order of the lines.
		{voters3 + "listeners=PLAINTEXT://:9092,CONTROLLER://:9093", "node.id is not set"},
		{voters3 + "node.id=5\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093",
			"node.id 5 is not in controller.quorum.voters 0@127.0.0.1:9093,1@127.0.0.1:9193,2@127.0.0.1:9293, but process.roles broker,controller makes it a controller"},
		{"process.roles=broker\nnode.id=1\n" + voters3, "node.id 1 is in controller.quorum.voters 0@127.0.0.1:9093,1@127.0.0.1:9193,2@127.0.0.1:9293, but process.roles=broker gives it no vote"},
		{"node.id=1\n" + voters3, "listeners has no CONTROLLER listener: node 1 is a controller, at 127.0.0.1:9193"},
		{"node.id=1\n" + voters3 + "listeners=PLAINTEXT://:9192,CONTROLLER://:9093", "disagree on node 1's port"},
		// Listeners.
		{"listeners=PLAINTEXT://:9092,FOO://:9094", "listeners: listener FOO://:9094: unknown name"},
		{"listeners=SSL://:9093", "SSL is not supported"},
		{"listeners=PLAINTEXT://:9092,PLAINTEXT://:9093", "listener PLAINTEXT is named twice"},
		{"listeners=PLAINTEXT://127.0.0.1:70000", "port \"70000\" is not in 0..65535"},
		{"advertised.listeners=PLAINTEXT://broker0:0", "port \"0\" is not in 1..65535"},
		{"listeners=CONTROLLER://:9093", "listeners has no PLAINTEXT listener"},
		{"listeners=", `listeners: ""`},
		{"advertised.listeners=PLAINTEXT://:9092", "no host"},
		{"advertised.listeners=PLAINTEXT://0.0.0.0:9092", "not every interface"},
		{"advertised.listeners=EXTERNAL://broker:9092", "listener EXTERNAL://broker:9092: unknown name"},
		{"controller.listener.names=PLAINTEXT", "the client listener's name"},
		{"controller.listener.names=A,B", "one controller listener name"},
		{"listener.security.protocol.map=PLAINTEXT:SSL", `"PLAINTEXT:SSL": SSL is not supported`},
		{"listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT", "SASL_PLAINTEXT is not supported"},
		{"listener.security.protocol.map=PLAINTEXT:TLS", `"TLS" is not a security protocol`},
		{"inter.broker.listener.name=INTERNAL", `inter.broker.listener.name: "INTERNAL" is not supported: only PLAINTEXT`},
		{"controller.quorum.bootstrap.servers=a:9093,b:9093,c:9093", "Sluice's quorum is static"},
		// Timeouts.
		{"broker.heartbeat.interval.ms=0", "broker.heartbeat.interval.ms: 0 is out of range [1, ...]"},
		{"broker.session.timeout.ms=2000", "broker.session.timeout.ms 2000 must exceed broker.heartbeat.interval.ms 2000"},
		{"broker.heartbeat.interval.ms=10000", "must exceed broker.heartbeat.interval.ms 10000"},
		{"controlled.shutdown.enable=maybe", `controlled.shutdown.enable: "maybe" is not true or false`},
		{"default.replication.factor=0", "default.replication.factor: 0 is out of range [1, 32767]"},
		// Values that would change what is stored, refused rather than ignored.
		{"log.cleanup.policy=compact", "compaction is not supported yet"},
		{"compression.type=zstd", "never recompresses"},
	} {
		c := DefaultConfig()
		err := ParseProperties(strings.NewReader(bad.in), &c)
		if err == nil {
			t.Errorf("%q accepted: %+v", bad.in, c)
		} else if !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %q does not say %q", bad.in, err, bad.want)
		}
	}
}

// TestUnknownProperty: a key that is neither Sluice's nor a Kafka broker key is refused with
// the closest known key, so a typo is fixed at once; a topic config names its broker form.
func TestUnknownProperty(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"log.retention.hour=1", `unknown property "log.retention.hour": did you mean log.retention.hours?`},
		{"node.idd=1", "did you mean node.id?"},
		{"controller.quorum.voter=0@h:1", "did you mean controller.quorum.voters?"},
		{"num.io.thread=8", "did you mean num.io.threads?"},
		{"listener=PLAINTEXT://:9092", "did you mean listeners?"},
		{"retention.ms=1000", "it is a topic config; the broker-wide default is log.retention.ms"},
		{"zookeeper.connect=localhost:2181", "ZooKeeper mode is not supported"},
		{"no.such.property=1", `unknown property "no.such.property"`},
	} {
		c := DefaultConfig()
		err := ParseProperties(strings.NewReader(tc.in), &c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
	}
	c := DefaultConfig()
	if err := ParseProperties(strings.NewReader("qqqqqqqqqqqqqqqq=1"), &c); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a key near nothing: %v, want no suggestion", err)
	}
	// Set alone does not know the ignored Kafka keys: only a file is taken as a whole.
	if err := c.Set("num.io.threads", "8"); err == nil {
		t.Error("Set accepted num.io.threads")
	}
}

// TestOverrides: an override (serve --override, as kafka-server-start's) replaces every line of
// its key in the file, and the whole-file checks see the result.
func TestOverrides(t *testing.T) {
	file := "node.id=1\nnum.partitions=3\nnum.partitions=4\nnum.io.threads=8\n"
	c := DefaultConfig()
	ignored, err := ReadProperties(strings.NewReader(file), &c, "num.partitions=7", "log.retention.hours=1", "socket.send.buffer.bytes=1")
	if err != nil {
		t.Fatal(err)
	}
	if c.NumPartitions != 7 || c.RetentionMs != time.Hour || c.NodeID != 1 {
		t.Errorf("num.partitions %d, retention %v, node %d", c.NumPartitions, c.RetentionMs, c.NodeID)
	}
	if want := []string{"num.io.threads", "socket.send.buffer.bytes"}; !slices.Equal(ignored, want) {
		t.Errorf("ignored %q, want %q", ignored, want)
	}
	for _, bad := range []struct {
		override, want string
	}{
		{"num.partitions", `--override "num.partitions" is not key=value`},
		{"num.partitions=x", `--override: num.partitions: "x" is not an integer`},
		{"process.roles=broker", "process.roles=broker needs controller.quorum.voters"},
	} {
		c := DefaultConfig()
		if _, err := ReadProperties(strings.NewReader(file), &c, bad.override); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("--override %s: %v, want %q", bad.override, err, bad.want)
		}
	}
}

// TestConfigDefaults: every registered default parses, through Set, to DefaultConfig's value,
// so the reference's defaults are the broker's; every name and alias is unique and the Kafka
// keys with no effect do not shadow a known one.
func TestConfigDefaults(t *testing.T) {
	for _, d := range configDefs {
		if (d.Default == "") == (d.DefaultDoc == "") {
			t.Errorf("%s: want exactly one of Default and DefaultDoc", d.Name)
			continue
		}
		if d.Origin == "" || d.Doc == "" || d.Type == 0 || !slices.Contains(configGroups, d.Group) {
			t.Errorf("%s: origin, doc, type or group missing", d.Name)
		}
		if d.Default == "" {
			continue
		}
		c := DefaultConfig()
		if err := c.Set(d.Name, d.Default); err != nil {
			t.Errorf("%s: default %q: %v", d.Name, d.Default, err)
		} else if !reflect.DeepEqual(c, DefaultConfig()) {
			t.Errorf("%s=%s parses to\n%+v\nnot DefaultConfig's\n%+v", d.Name, d.Default, c, DefaultConfig())
		}
	}
	if !slices.IsSorted(kafkaIgnored) {
		t.Error("kafkaIgnored is not sorted (isKafkaIgnored searches it)")
	}
	for _, n := range kafkaIgnored {
		if _, known := configByName[n]; known {
			t.Errorf("%s is both known and ignored", n)
		}
	}
}
