package broker

//go:generate go test -run TestConfigurationDoc -update .

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/cluster"
)

// configDef is one broker property: what Set parses and what docs/configuration.md lists,
// from the same entry, so that the reference cannot drift from the parser
// (TestConfigurationDoc fails when the file is stale).
type configDef struct {
	Name    string
	Aliases []string // other names Set takes for it (broker.id for node.id)
	Type    cluster.ConfigType
	// Default is the default as a value of the property, which Set parses back to
	// DefaultConfig's field (TestConfigDefaults); "" when it is computed at start, and then
	// DefaultDoc says how.
	Default    string
	DefaultDoc string
	Origin     string // whose name it is: Kafka's, Redpanda's or Sluice's own
	Group      string // the section of docs/configuration.md
	Doc        string
	set        func(c *Config, p prop) error
}

// Origins and groups.
const (
	kafka    = "Kafka"
	redpanda = "Redpanda"
	sluice   = "Sluice"

	groupCluster   = "Node and cluster"
	groupListeners = "Listeners and connections"
	groupLog       = "Logs (the broker-wide defaults of topic configs)"
	groupStorage   = "Disk space and I/O"
	groupReplicas  = "Replication"
	groupGroups    = "Consumer groups"
)

// configGroups is the order of docs/configuration.md's sections.
var configGroups = []string{groupCluster, groupListeners, groupLog, groupReplicas, groupGroups, groupStorage}

// configDefs is the registry, by group (docs/configuration.md sorts each group by name).
var configDefs = []configDef{
	// Replication (issue #23): Kafka's names, defaults and meanings.
	{Name: "num.replica.fetchers", Type: cluster.ConfigInt, Default: "1", Origin: kafka, Group: groupReplicas,
		Doc: "replica fetchers per source broker: the partitions this broker follows on one leader are spread over this many connections, each one long-polling fetch for all of its partitions",
		set: func(c *Config, p prop) error { return p.integer(&c.NumReplicaFetchers, 1, 64) }},
	{Name: "replica.fetch.backoff.ms", Type: cluster.ConfigInt, Default: "1000", Origin: kafka, Group: groupReplicas,
		Doc: "how long a replica fetcher waits before it fetches again after a failed fetch (the leader unreachable, an error for every partition)",
		set: func(c *Config, p prop) error { return p.dur(&c.ReplicaFetchBackoff, time.Millisecond, positiveMs) }},
	{Name: "replica.fetch.max.bytes", Type: cluster.ConfigInt, Default: "1048576", Origin: kafka, Group: groupReplicas,
		Doc: "the most bytes a follower asks for per partition in one fetch (a larger first batch still comes whole)",
		set: func(c *Config, p prop) error { return p.integer(&c.ReplicaFetchMaxBytes, 1, math.MaxInt32) }},
	{Name: "replica.fetch.min.bytes", Type: cluster.ConfigInt, Default: "1", Origin: kafka, Group: groupReplicas,
		Doc: "the bytes a follower's fetch waits for, up to replica.fetch.wait.max.ms",
		set: func(c *Config, p prop) error { return p.integer(&c.ReplicaFetchMinBytes, 1, math.MaxInt32) }},
	{Name: "replica.fetch.response.max.bytes", Type: cluster.ConfigInt, Default: "10485760", Origin: kafka, Group: groupReplicas,
		Doc: "the most bytes a follower asks for in one fetch over all its partitions",
		set: func(c *Config, p prop) error { return p.integer(&c.ReplicaFetchResponseMaxBytes, 1, math.MaxInt32) }},
	{Name: "replica.fetch.wait.max.ms", Type: cluster.ConfigInt, Default: "500", Origin: kafka, Group: groupReplicas,
		Doc: "how long a follower's fetch is parked on the leader waiting for data; must be below replica.lag.time.max.ms",
		set: func(c *Config, p prop) error { return p.dur(&c.ReplicaFetchWait, time.Millisecond, positiveMs) }},
	{Name: "replica.high.watermark.checkpoint.interval.ms", Type: cluster.ConfigLong, Default: "5000", Origin: kafka, Group: groupReplicas,
		Doc: "how often each replica's high watermark is written to replication-offset-checkpoint in the data directory",
		set: func(c *Config, p prop) error { return p.dur(&c.HighWatermarkCheckpoint, time.Millisecond, positiveMs) }},
	{Name: "replica.lag.time.max.ms", Type: cluster.ConfigLong, Default: "30000", Origin: kafka, Group: groupReplicas,
		Doc: "a follower that has not caught up with the leader's log end for this long leaves the ISR (the leader proposes the shrink to the controller)",
		set: func(c *Config, p prop) error { return p.dur(&c.ReplicaLagTimeMax, time.Millisecond, positiveMs) }},

	// Node and cluster (issue #22: KRaft's names and formats).
	{Name: "broker.heartbeat.interval.ms", Type: cluster.ConfigInt, Default: "2000", Origin: kafka, Group: groupCluster,
		Doc: "how often a broker heartbeats to the active controller",
		set: func(c *Config, p prop) error { return p.dur(&c.HeartbeatInterval, time.Millisecond, positiveMs) }},
	{Name: "broker.session.timeout.ms", Type: cluster.ConfigInt, Default: "9000", Origin: kafka, Group: groupCluster,
		Doc: "a broker without a heartbeat for this long is fenced (its partitions get other leaders); must exceed broker.heartbeat.interval.ms",
		set: func(c *Config, p prop) error { return p.dur(&c.SessionTimeout, time.Millisecond, positiveMs) }},
	{Name: "controlled.shutdown.enable", Type: cluster.ConfigBoolean, Default: "true", Origin: kafka, Group: groupCluster,
		Doc: "at SIGTERM, ask the controller to move this broker's leaderships to other in-sync replicas before stopping",
		set: func(c *Config, p prop) error {
			enable := true
			if err := p.boolean(&enable); err != nil {
				return err
			}
			c.DisableControlledShutdown = !enable
			return nil
		}},
	{Name: "controller.quorum.bootstrap.servers", Type: cluster.ConfigList, DefaultDoc: "none", Origin: kafka, Group: groupCluster,
		Doc: "Kafka 4's dynamic quorum (KIP-853): accepted with one address (a lone node, as Kafka's quick start); a quorum of several needs controller.quorum.voters",
		set: func(c *Config, p prop) error {
			_, err := parseBootstrapServers(p)
			return err
		}},
	{Name: "controller.quorum.voters", Type: cluster.ConfigList, DefaultDoc: "this node alone", Origin: kafka, Group: groupCluster,
		Doc: "the controller quorum, id@host:port of each voter's CONTROLLER listener: 0@127.0.0.1:9093,1@127.0.0.1:9193,2@127.0.0.1:9293",
		set: func(c *Config, p prop) error {
			vs, err := cluster.ParseVoters(p.value)
			if err != nil {
				return err
			}
			c.Voters = vs
			return nil
		}},
	{Name: "auto.leader.rebalance.enable", Type: cluster.ConfigBoolean, Default: "true", Origin: kafka, Group: groupCluster,
		Doc: "the active controller moves leaderships back to their preferred replicas (the first of each partition's replicas) for brokers whose share falls short by more than leader.imbalance.per.broker.percentage",
		set: func(c *Config, p prop) error {
			enable := true
			if err := p.boolean(&enable); err != nil {
				return err
			}
			c.DisableAutoLeaderRebalance = !enable
			return nil
		}},
	{Name: "leader.imbalance.check.interval.seconds", Type: cluster.ConfigLong, Default: "300", Origin: kafka, Group: groupCluster,
		Doc: "how often the active controller checks the leaderships' balance",
		set: func(c *Config, p prop) error { return p.dur(&c.LeaderImbalanceCheckInterval, time.Second, positiveMs) }},
	{Name: "leader.imbalance.per.broker.percentage", Type: cluster.ConfigInt, Default: "10", Origin: kafka, Group: groupCluster,
		Doc: "the share of a broker's preferred leaderships led elsewhere above which they are moved back",
		set: func(c *Config, p prop) error { return p.integer(&c.LeaderImbalancePerBrokerPercentage, 1, 100) }},
	{Name: "default.replication.factor", Type: cluster.ConfigInt, Default: "1", Origin: kafka, Group: groupCluster,
		Doc: "replication factor of topics created without one (auto-created topics too)",
		set: func(c *Config, p prop) error { return p.integer(&c.DefaultReplication, 1, math.MaxInt16) }},
	{Name: "node.id", Aliases: []string{"broker.id"}, Type: cluster.ConfigInt, DefaultDoc: "0, or the id the data directory records", Origin: kafka, Group: groupCluster,
		Doc: "this node's id, from 0; required with controller.quorum.voters",
		set: func(c *Config, p prop) error {
			var n int
			if err := p.integer(&n, 0, math.MaxInt32); err != nil {
				return err
			}
			c.NodeID, c.NodeIDSet = int32(n), true
			return nil
		}},
	{Name: "num.partitions", Type: cluster.ConfigInt, Default: "1", Origin: kafka, Group: groupCluster,
		Doc: "partitions of topics created without a count",
		set: func(c *Config, p prop) error { return p.integer(&c.NumPartitions, 1, math.MaxInt32) }},
	{Name: "auto.create.topics.enable", Type: cluster.ConfigBoolean, Default: "false", Origin: kafka, Group: groupCluster,
		Doc: "create a topic when a client first produces to or asks metadata for it (Kafka's default is true)",
		set: func(c *Config, p prop) error { return p.boolean(&c.AutoCreateTopics) }},
	{Name: "offsets.topic.num.partitions", Type: cluster.ConfigInt, Default: "50", Origin: kafka, Group: groupCluster,
		Doc: "partitions of __consumer_offsets, fixed when it is first created",
		set: func(c *Config, p prop) error { return p.integer(&c.OffsetsTopicPartitions, 1, math.MaxInt32) }},
	{Name: "offsets.topic.replication.factor", Type: cluster.ConfigShort, Default: "3", Origin: kafka, Group: groupGroups,
		Doc: "replicas of __consumer_offsets, created on the first group request; the live brokers then if fewer",
		set: func(c *Config, p prop) error { return p.integer(&c.OffsetsTopicReplication, 1, math.MaxInt16) }},
	{Name: "offsets.commit.timeout.ms", Type: cluster.ConfigInt, Default: "5000", Origin: kafka, Group: groupGroups,
		Doc: "how long a commit (or a group's snapshot) waits for every in-sync replica before it fails with REQUEST_TIMED_OUT",
		set: func(c *Config, p prop) error { return p.dur(&c.OffsetsCommitTimeout, time.Millisecond, positiveMs) }},
	{Name: "group.initial.rebalance.delay.ms", Type: cluster.ConfigInt, Default: "3000", Origin: kafka, Group: groupGroups,
		Doc: "how long the first rebalance of an empty group waits for more members, extended by each join up to the rebalance timeout",
		set: func(c *Config, p prop) error {
			var d time.Duration
			if err := p.dur(&d, time.Millisecond, bounds{lo: 0, hi: math.MaxInt32}); err != nil {
				return err
			}
			if d == 0 {
				d = -1 // none (the field's zero is the default)
			}
			c.GroupInitialRebalanceDelay = d
			return nil
		}},
	{Name: "group.min.session.timeout.ms", Type: cluster.ConfigInt, Default: "6000", Origin: kafka, Group: groupGroups,
		Doc: "the shortest session.timeout.ms a member may ask for (INVALID_SESSION_TIMEOUT below)",
		set: func(c *Config, p prop) error { return p.dur(&c.GroupMinSessionTimeout, time.Millisecond, positiveMs) }},
	{Name: "group.max.session.timeout.ms", Type: cluster.ConfigInt, Default: "1800000", Origin: kafka, Group: groupGroups,
		Doc: "the longest session.timeout.ms a member may ask for (INVALID_SESSION_TIMEOUT above)",
		set: func(c *Config, p prop) error { return p.dur(&c.GroupMaxSessionTimeout, time.Millisecond, positiveMs) }},
	{Name: "group.max.size", Type: cluster.ConfigInt, Default: "2147483647", Origin: kafka, Group: groupGroups,
		Doc: "the most members a group may have (GROUP_MAX_SIZE_REACHED beyond)",
		set: func(c *Config, p prop) error {
			if err := p.integer(&c.GroupMaxSize, 1, math.MaxInt32); err != nil {
				return err
			}
			if c.GroupMaxSize == math.MaxInt32 {
				c.GroupMaxSize = 0
			}
			return nil
		}},
	{Name: "process.roles", Type: cluster.ConfigList, Default: "broker,controller", Origin: kafka, Group: groupCluster,
		Doc: "broker (hosts partitions, no vote), controller (votes in the quorum), or both (KRaft's combined mode)",
		set: func(c *Config, p prop) error {
			r, err := parseRoles(p)
			if err != nil {
				return err
			}
			c.Roles = r
			return nil
		}},
	{Name: "unclean.leader.election.enable", Type: cluster.ConfigBoolean, Default: "false", Origin: kafka, Group: groupCluster,
		Doc: "the default of the topic config: elect a replica outside the ISR when no in-sync one is alive (data acknowledged by the others is lost)",
		set: func(c *Config, p prop) error { return p.boolean(&c.UncleanLeaderElection) }},

	// Listeners and connections.
	{Name: "advertised.listeners", Type: cluster.ConfigString, DefaultDoc: "listeners' PLAINTEXT address", Origin: kafka, Group: groupListeners,
		Doc: "the PLAINTEXT address given to clients and other brokers, when it is not the one listened on (PLAINTEXT://broker0.example:9092); a CONTROLLER entry is the address this node's controller.quorum.voters entry may name instead of its CONTROLLER listener (a proxy in front of it, as sluice chaos puts)",
		set: func(c *Config, p prop) error { return setAdvertisedListeners(c, p) }},
	{Name: "connections.max.idle.ms", Type: cluster.ConfigLong, Default: "600000", Origin: kafka, Group: groupListeners,
		Doc: "close a connection idle this long; -1 never",
		set: func(c *Config, p prop) error {
			return p.dur(&c.IdleTimeout, time.Millisecond, bounds{lo: -1, hi: math.MaxInt64,
				zero: unset("close a connection as soon as it is idle", "-1 never closes idle connections")})
		}},
	{Name: "controller.listener.names", Type: cluster.ConfigString, Default: "CONTROLLER", Origin: kafka, Group: groupListeners,
		Doc: "the name, in listeners, of the listener that carries raft and the controller's requests (one name)",
		set: func(c *Config, p prop) error {
			names := splitList(p.value)
			switch {
			case len(names) != 1:
				return fmt.Errorf("%s: %q: Sluice takes one controller listener name", p.key, p.value)
			case names[0] == plaintext:
				return fmt.Errorf("%s: %q is the client listener's name; name the controller's another (CONTROLLER)", p.key, p.value)
			case !validListenerName(names[0]):
				return fmt.Errorf("%s: %q is not a listener name (letters, digits and _)", p.key, p.value)
			}
			c.ControllerListenerName = names[0]
			return nil
		}},
	{Name: "inter.broker.listener.name", Type: cluster.ConfigString, Default: "PLAINTEXT", Origin: kafka, Group: groupListeners,
		Doc: "the listener brokers use between them: PLAINTEXT, the only one",
		set: func(c *Config, p prop) error { return p.only(plaintext, "brokers talk over the PLAINTEXT listener") }},
	{Name: "listener.name.plaintext.max.connections", Type: cluster.ConfigInt, DefaultDoc: "unlimited", Origin: kafka, Group: groupListeners,
		Doc: "most connections open at once on the TCP listener",
		set: func(c *Config, p prop) error { return p.integer(&c.PlaintextMaxConnections, 1, math.MaxInt32) }},
	{Name: "listener.name.unix.max.connections", Type: cluster.ConfigInt, DefaultDoc: "unlimited", Origin: sluice, Group: groupListeners,
		Doc: "most connections open at once on the unix socket",
		set: func(c *Config, p prop) error { return p.integer(&c.UnixMaxConnections, 1, math.MaxInt32) }},
	{Name: "listener.security.protocol.map", Type: cluster.ConfigString, Default: "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", Origin: kafka, Group: groupListeners,
		Doc: "accepted when the PLAINTEXT and controller listeners map to PLAINTEXT (entries for other names, as Kafka's default has, are fine); SSL and SASL are not supported",
		set: func(c *Config, p prop) error { return checkProtocolMap(c, p) }},
	{Name: "listeners", Type: cluster.ConfigString, Default: "PLAINTEXT://127.0.0.1:9092", Origin: kafka, Group: groupListeners,
		Doc: "NAME://host:port, comma-separated: PLAINTEXT for clients and brokers, CONTROLLER (controller.listener.names) for the quorum; an empty host is every interface (Kafka's default is PLAINTEXT://:9092)",
		set: func(c *Config, p prop) error { return setListeners(c, p) }},
	{Name: "max.connections", Type: cluster.ConfigInt, DefaultDoc: "a quarter of RLIMIT_NOFILE", Origin: kafka, Group: groupListeners,
		Doc: "most client connections open at once, over all listeners",
		set: func(c *Config, p prop) error { return p.integer(&c.MaxConnections, 1, math.MaxInt32) }},
	{Name: "max.connections.per.ip", Type: cluster.ConfigInt, DefaultDoc: "unlimited", Origin: kafka, Group: groupListeners,
		Doc: "most connections open at once from one address",
		set: func(c *Config, p prop) error { return p.integer(&c.MaxConnectionsPerIP, 1, math.MaxInt32) }},
	{Name: "queued.max.request.bytes", Type: cluster.ConfigLong, Default: "104857600", Origin: kafka, Group: groupListeners,
		Doc: "bytes of requests read and not yet answered, over all connections, before reading pauses (Kafka's default is -1: unbounded); -1 unbounded",
		set: func(c *Config, p prop) error {
			return p.i64(&c.QueuedMaxRequestBytes, sluiceBytes("-1 leaves queued requests unbounded"))
		}},
	{Name: "request.timeout.ms", Type: cluster.ConfigInt, Default: "30000", Origin: sluice, Group: groupListeners,
		Doc: "a request frame must arrive whole within this from its first byte, or the connection is closed; -1 never",
		set: func(c *Config, p prop) error {
			return p.dur(&c.RequestTimeout, time.Millisecond, bounds{lo: -1, hi: math.MaxInt64,
				zero: unset("no time at all for a request", "-1 never closes a slow request")})
		}},
	{Name: "security.inter.broker.protocol", Type: cluster.ConfigString, Default: "PLAINTEXT", Origin: kafka, Group: groupListeners,
		Doc: "PLAINTEXT, the only protocol",
		set: func(c *Config, p prop) error { return p.only(plaintext, "SSL and SASL are not supported") }},
	{Name: "shared.memory.max.bytes", Type: cluster.ConfigLong, Default: "67108864", Origin: sluice, Group: groupListeners,
		Doc: "largest shared-memory region a producer on this host may attach to its unix-socket connection; -1 refuses them",
		set: func(c *Config, p prop) error {
			return p.i64(&c.SharedMemoryBytes, sluiceBytes("-1 refuses every shared-memory region"))
		}},
	{Name: "socket.request.max.bytes", Type: cluster.ConfigInt, Default: "104857600", Origin: kafka, Group: groupListeners,
		Doc: "largest request frame",
		set: func(c *Config, p prop) error { return p.integer(&c.SocketRequestMaxBytes, 1, math.MaxInt32) }},
	{Name: "unix.socket.path", Type: cluster.ConfigString, DefaultDoc: "sluice.sock in the data directory", Origin: sluice, Group: groupListeners,
		Doc: "the unix socket clients on this host may use instead of TCP; - for none",
		set: func(c *Config, p prop) error { c.UnixPath = p.value; return nil }},

	// Logs.
	{Name: "compression.type", Type: cluster.ConfigString, Default: "producer", Origin: kafka, Group: groupLog,
		Doc: "producer only: the broker keeps the producer's codec and never recompresses",
		set: func(c *Config, p prop) error { return p.only("producer", "the broker never recompresses") }},
	{Name: "log.cleanup.policy", Type: cluster.ConfigList, Default: "delete", Origin: kafka, Group: groupLog,
		Doc: "delete only: old segments go by time or size; compaction is not supported yet",
		set: func(c *Config, p prop) error { return p.only("delete", "compaction is not supported yet") }},
	{Name: "log.dirs", Aliases: []string{"log.dir"}, Type: cluster.ConfigString, Default: "data", Origin: kafka, Group: groupLog,
		Doc: "the data directory (Sluice uses the first of a list; Kafka's default is /tmp/kafka-logs)",
		set: func(c *Config, p prop) error {
			dir := strings.TrimSpace(strings.Split(p.value, ",")[0])
			if dir == "" {
				// An empty DataDir is "unset": it would silently become ./data.
				return fmt.Errorf("%s: %q does not start with a directory (Sluice uses the first)", p.key, p.value)
			}
			c.DataDir = dir
			return nil
		}},
	{Name: "log.flush.interval.messages", Type: cluster.ConfigLong, Default: "9223372036854775807", Origin: kafka, Group: groupLog,
		Doc: "fsync a partition once this many records are unsynced",
		set: func(c *Config, p prop) error {
			return p.i64(&c.FlushMessages, bounds{lo: 1, hi: math.MaxInt64, topic: "flush.messages"})
		}},
	{Name: "log.flush.interval.ms", Type: cluster.ConfigLong, Default: "-1", Origin: kafka, Group: groupLog,
		Doc: "fsync a partition once data has been unsynced this long; -1 never (Kafka's default, unset, is the same)",
		set: func(c *Config, p prop) error {
			// -1 is Sluice's "never" (Kafka's Long.MAX_VALUE, the default).
			return p.dur(&c.FlushMs, time.Millisecond, bounds{lo: -1, hi: math.MaxInt64,
				zero: unset("fsync at every check of the flusher", "1 is the nearest")})
		}},
	{Name: "log.index.interval.bytes", Type: cluster.ConfigInt, Default: "4096", Origin: kafka, Group: groupLog,
		Doc: "bytes between offset index entries",
		set: func(c *Config, p prop) error {
			return p.i64(&c.IndexIntervalBytes, bounds{lo: 1, hi: math.MaxInt32, topic: "index.interval.bytes",
				zero: unset("an index entry for every batch", "1 does the same")})
		}},
	{Name: "log.index.size.max.bytes", Type: cluster.ConfigInt, Default: "10485760", Origin: kafka, Group: groupLog,
		Doc: "size of each segment's offset and time index files, from 12 (one time index entry)",
		set: func(c *Config, p prop) error {
			// Topic segment.index.bytes is Kafka's [4, 2^31-1], but a writable index must hold
			// one entry of each index (index.Open*Index refuses it at startup otherwise).
			return p.i64(&c.IndexMaxBytes, bounds{lo: minIndexBytes, hi: math.MaxInt32, topic: "segment.index.bytes",
				why: fmt.Sprintf("a time index entry is %d bytes", minIndexBytes)})
		}},
	{Name: "log.max.open.files", Type: cluster.ConfigInt, DefaultDoc: "an eighth of RLIMIT_NOFILE (at least 64)", Origin: sluice, Group: groupLog,
		Doc: "most sealed-segment log files open at once over every partition (the least recently read are closed); 0 the default",
		set: func(c *Config, p prop) error {
			return p.i64(&c.MaxOpenFiles, bounds{lo: 0, hi: math.MaxInt32, why: "0 takes an eighth of the open-file limit"})
		}},
	{Name: "log.message.timestamp.type", Type: cluster.ConfigString, Default: "CreateTime", Origin: kafka, Group: groupLog,
		Doc: "CreateTime only as the broker-wide default; a topic may set message.timestamp.type=LogAppendTime",
		set: func(c *Config, p prop) error { return p.only("CreateTime", "set LogAppendTime on the topic") }},
	{Name: "log.preallocate.bytes", Type: cluster.ConfigLong, Default: "67108864", Origin: sluice, Group: groupLog,
		Doc: "how far ahead at most an active segment's disk blocks are reserved (as far as it has been written, from 1 MiB), which keeps ext4 from stalling appends; -1 off",
		set: func(c *Config, p prop) error {
			return p.i64(&c.PreallocateBytes, sluiceBytes("-1 turns preallocation off"))
		}},
	{Name: "log.retention.bytes", Type: cluster.ConfigLong, Default: "-1", Origin: kafka, Group: groupLog,
		Doc: "most bytes a partition keeps before its oldest segments go; -1 no limit",
		set: func(c *Config, p prop) error {
			// Any negative is unlimited, as in Kafka.
			return p.i64(&c.RetentionBytes, bounds{lo: math.MinInt64, hi: math.MaxInt64, topic: "retention.bytes",
				zero: unset("delete every segment, the active one too", "")})
		}},
	{Name: "log.retention.check.interval.ms", Type: cluster.ConfigLong, Default: "300000", Origin: kafka, Group: groupLog,
		Doc: "how often retention looks for segments to delete",
		set: func(c *Config, p prop) error { return p.dur(&c.RetentionCheck, time.Millisecond, positiveMs) }},
	{Name: "producer.id.expiration.ms", Type: cluster.ConfigInt, Default: "86400000", Origin: kafka, Group: groupLog,
		Doc: "how long a partition remembers an idempotent producer that sends nothing (its epoch and last 5 runs of batches)",
		set: func(c *Config, p prop) error { return p.dur(&c.ProducerIDExpiration, time.Millisecond, positiveMs) }},
	{Name: "producer.id.expiration.check.interval.ms", Type: cluster.ConfigInt, Default: "600000", Origin: kafka, Group: groupLog,
		Doc: "how often partitions forget idle producers (producer.id.expiration.ms)",
		set: func(c *Config, p prop) error {
			return p.dur(&c.ProducerIDExpirationCheck, time.Millisecond, positiveMs)
		}},
	{Name: "log.retention.hours", Type: cluster.ConfigInt, Default: "168", Origin: kafka, Group: groupLog,
		Doc: "log.retention.ms in hours (log.retention.ms and .minutes win over it, wherever they are in the file)",
		set: func(c *Config, p prop) error {
			return p.dur(&c.RetentionMs, time.Hour, retentionTime(math.MaxInt32, ""))
		}},
	{Name: "log.retention.minutes", Type: cluster.ConfigInt, DefaultDoc: "unset", Origin: kafka, Group: groupLog,
		Doc: "log.retention.ms in minutes (log.retention.ms wins over it)",
		set: func(c *Config, p prop) error {
			return p.dur(&c.RetentionMs, time.Minute, retentionTime(math.MaxInt32, ""))
		}},
	{Name: "log.retention.ms", Type: cluster.ConfigLong, DefaultDoc: "unset (log.retention.hours' 7 days)", Origin: kafka, Group: groupLog,
		Doc: "how long a segment is kept after its newest record; -1 forever",
		set: func(c *Config, p prop) error {
			return p.dur(&c.RetentionMs, time.Millisecond, retentionTime(math.MaxInt64, "retention.ms"))
		}},
	{Name: "log.retry.backoff.max.ms", Type: cluster.ConfigLong, Default: "60000", Origin: sluice, Group: groupLog,
		Doc: "longest wait between retries of a log's failed recovery-point writes, index pages or reopening (each retry waits twice the last)",
		set: func(c *Config, p prop) error { return p.dur(&c.LogRetryBackoffMax, time.Millisecond, positiveMs) }},
	{Name: "log.retry.backoff.ms", Type: cluster.ConfigLong, Default: "1000", Origin: sluice, Group: groupLog,
		Doc: "first wait before retrying what failed for want of a resource (after the clients' retry.backoff.ms)",
		set: func(c *Config, p prop) error { return p.dur(&c.LogRetryBackoff, time.Millisecond, positiveMs) }},
	{Name: "log.roll.hours", Type: cluster.ConfigInt, Default: "168", Origin: kafka, Group: groupLog,
		Doc: "log.roll.ms in hours (log.roll.ms wins over it)",
		set: func(c *Config, p prop) error {
			return p.dur(&c.SegmentMs, time.Hour, bounds{lo: 1, hi: math.MaxInt32})
		}},
	{Name: "log.roll.jitter.hours", Type: cluster.ConfigInt, Default: "0", Origin: kafka, Group: groupLog,
		Doc: "log.roll.jitter.ms in hours (log.roll.jitter.ms wins over it)",
		set: func(c *Config, p prop) error {
			return p.dur(&c.SegmentJitter, time.Hour, bounds{lo: 0, hi: math.MaxInt32})
		}},
	{Name: "log.roll.jitter.ms", Type: cluster.ConfigLong, DefaultDoc: "unset (log.roll.jitter.hours' 0)", Origin: kafka, Group: groupLog,
		Doc: "each segment rolls a random amount up to this before log.roll.ms",
		set: func(c *Config, p prop) error {
			return p.dur(&c.SegmentJitter, time.Millisecond, bounds{lo: 0, hi: math.MaxInt64, topic: "segment.jitter.ms"})
		}},
	{Name: "log.roll.ms", Type: cluster.ConfigLong, DefaultDoc: "unset (log.roll.hours' 7 days)", Origin: kafka, Group: groupLog,
		Doc: "a segment rolls once its first record is this old",
		set: func(c *Config, p prop) error {
			return p.dur(&c.SegmentMs, time.Millisecond, bounds{lo: 1, hi: math.MaxInt64, topic: "segment.ms"})
		}},
	{Name: "log.scrub.bytes.per.sec", Type: cluster.ConfigLong, Default: "4194304", Origin: sluice, Group: groupLog,
		Doc: "rate of the background re-read of sealed segments that checks every batch's CRC again, over all partitions; 0 or -1 off",
		set: func(c *Config, p prop) error {
			n, err := p.long(bounds{lo: -1, hi: math.MaxInt64})
			if err != nil {
				return err
			}
			if n == 0 {
				n = -1 // 0 turns the scrub off, as -1 does (Config's 0 would be the default)
			}
			c.ScrubBytesPerSec = n
			return nil
		}},
	{Name: "log.segment.bytes", Type: cluster.ConfigInt, Default: "1073741824", Origin: kafka, Group: groupLog,
		Doc: "a segment file rolls before it would grow past this, from 14",
		set: func(c *Config, p prop) error {
			// The range is topic segment.bytes' [14, 2^31-1]: 14 is a record's overhead
			// (Kafka's minimum), and a segment's positions must fit the index's 32 bits.
			return p.i64(&c.SegmentBytes, bounds{lo: math.MinInt64, hi: math.MaxInt64, topic: "segment.bytes"})
		}},
	{Name: "log.writeback.bytes", Type: cluster.ConfigLong, Default: "4194304", Origin: sluice, Group: groupLog,
		Doc: "start writeback of an active segment's dirty pages every this many appended bytes; -1 off",
		set: func(c *Config, p prop) error {
			return p.i64(&c.WritebackBytes, sluiceBytes("-1 turns writeback off"))
		}},
	{Name: "message.max.bytes", Type: cluster.ConfigInt, Default: "1048576", Origin: kafka, Group: groupLog,
		Doc: "largest record batch, the default of topic max.message.bytes (Kafka's is 1048588)",
		set: func(c *Config, p prop) error {
			// Kafka's [0, ...], but 0 refuses every batch; topic max.message.bytes caps it at 2^31-1.
			return p.i64(&c.MessageMaxBytes, bounds{lo: 1, hi: math.MaxInt32, topic: "max.message.bytes"})
		}},
	{Name: "min.insync.replicas", Type: cluster.ConfigInt, Default: "1", Origin: kafka, Group: groupLog,
		Doc: "1 only as the broker-wide default until replication lands; a topic may set its own",
		set: func(c *Config, p prop) error { return p.only("1", "set min.insync.replicas on the topic") }},
	{Name: "write.caching.default", Aliases: []string{"write_caching_default"}, Type: cluster.ConfigBoolean, Default: "false", Origin: redpanda, Group: groupLog,
		Doc: "the default of topic write.caching: false answers acks=all only after fsync",
		set: func(c *Config, p prop) error { return p.boolean(&c.WriteCaching) }},

	// Disk space and I/O (Redpanda's states and ballast file).
	{Name: "storage.ballast.bytes", Type: cluster.ConfigLong, Default: "67108864", Origin: sluice, Group: groupStorage,
		Doc: "a file of this size (at most 2 % of the filesystem) made at start and deleted when the disk is degraded, so raft and recovery points still have room; -1 none",
		set: func(c *Config, p prop) error { return p.i64(&c.BallastBytes, sluiceBytes("-1 makes no ballast file")) }},
	{Name: "storage.space.alert.free.bytes", Type: cluster.ConfigLong, Default: "0", Origin: redpanda, Group: groupStorage,
		Doc: "alert below this much free space (or below the percent, whichever is larger); 0 the percent alone",
		set: func(c *Config, p prop) error {
			return p.i64(&c.SpaceAlertFreeBytes, bounds{lo: 0, hi: math.MaxInt64}) // 0: only the percent
		}},
	{Name: "storage.space.alert.free.percent", Type: cluster.ConfigInt, Default: "5", Origin: redpanda, Group: groupStorage,
		Doc: "alert below this percent of the filesystem free; -1 off",
		set: func(c *Config, p prop) error {
			return p.i64(&c.SpaceAlertFreePercent, bounds{lo: -1, hi: 100,
				zero: "0 would be taken as unset (the default, 5); -1 turns the percent off"})
		}},
	{Name: "storage.space.min.free.bytes", Type: cluster.ConfigLong, DefaultDoc: "the smaller of 1 GiB and 2 % of the filesystem", Origin: redpanda, Group: groupStorage,
		Doc: "degraded (clients' produce refused, retriable) below this much free space; -1 never",
		set: func(c *Config, p prop) error {
			return p.i64(&c.SpaceMinFreeBytes, bounds{lo: -1, hi: math.MaxInt64,
				zero: "0 would be taken as unset (the default: the smaller of 1 GiB and 2 % of the filesystem); -1 is never degraded"})
		}},
}

// configByName finds a registry entry by name or alias.
var configByName = func() map[string]*configDef {
	m := make(map[string]*configDef, len(configDefs))
	for i := range configDefs {
		d := &configDefs[i]
		for _, n := range append([]string{d.Name}, d.Aliases...) {
			if _, dup := m[n]; dup {
				panic("broker: config " + n + " registered twice")
			}
			m[n] = d
		}
	}
	return m
}()

// configNames is every name Set takes, sorted (the did-you-mean candidates).
var configNames = func() []string {
	names := make([]string, 0, len(configByName))
	for n := range configByName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}()

// splitList splits a comma list, trimming each item and dropping empty ones.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseRoles is process.roles: broker, controller, or both in either order; both is the zero
// Roles, so that a file naming them equals the default.
func parseRoles(p prop) (Roles, error) {
	items := strings.Split(p.value, ",")
	var r Roles
	for _, item := range items {
		var role Roles
		switch strings.TrimSpace(item) {
		case "broker":
			role = RoleBroker
		case "controller":
			role = RoleController
		default:
			return 0, fmt.Errorf("%s: %q: want broker, controller or broker,controller", p.key, p.value)
		}
		if r&role != 0 {
			return 0, fmt.Errorf("%s: %q names %s twice", p.key, p.value, strings.TrimSpace(item))
		}
		r |= role
	}
	if r == RoleBroker|RoleController {
		r = 0
	}
	return r, nil
}

// parseBootstrapServers is controller.quorum.bootstrap.servers: host:port, comma-separated.
func parseBootstrapServers(p prop) ([]string, error) {
	addrs := splitList(p.value)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s: empty: want host:port[,host:port...]", p.key)
	}
	for _, a := range addrs {
		if err := checkHostPort(a, false); err != nil {
			return nil, fmt.Errorf("%s: %q: %v", p.key, a, err)
		}
	}
	return addrs, nil
}
