package broker

import (
	"context"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// Config is one broker's configuration. Field comments give the Kafka property that sets each
// (ParseProperties reads a Kafka-style .properties file); zero values take the defaults below.
type Config struct {
	NodeID int32 // node.id (broker.id): 0, from 0 as in Kafka
	// NodeIDSet says NodeID was given (node.id), so that 0 can be a node id: unset, a data
	// directory that records its node id (one made before ids started at 0 says 1) keeps it.
	NodeIDSet bool
	// The properties and their defaults are registered in configkeys.go (what Set parses and
	// docs/configuration.md lists); ReadProperties (configparse.go) reads a file of them.

	// The cluster (issue #22). Roles zero is both broker and controller; Voters nil is a
	// quorum of this node alone (today's single-node broker).
	Roles                  Roles           // process.roles: broker,controller
	Voters                 []cluster.Voter // controller.quorum.voters: this node alone
	ControllerListen       string          // listeners' CONTROLLER://host:port: none ("" for a lone node)
	ControllerListenerName string          // controller.listener.names (the first): CONTROLLER
	AdvertisedListen       string          // advertised.listeners' PLAINTEXT host:port: Listen's
	// AdvertisedControllerListen is advertised.listeners' CONTROLLER host:port: the address the
	// voters name this node at when something (a proxy) sits in front of ControllerListen.
	AdvertisedControllerListen string
	HeartbeatInterval          time.Duration // broker.heartbeat.interval.ms: 2 s
	SessionTimeout             time.Duration // broker.session.timeout.ms: 9 s
	// DisableControlledShutdown is controlled.shutdown.enable=false: Close then stops without
	// first asking the controller to move this broker's leaderships away.
	DisableControlledShutdown bool
	// UncleanLeaderElection is unclean.leader.election.enable, the broker-wide default of the
	// topic config: false, as in Kafka.
	UncleanLeaderElection bool
	// DisableAutoLeaderRebalance is auto.leader.rebalance.enable=false: the active controller
	// then leaves leaderships off their preferred replicas. LeaderImbalancePerBrokerPercentage
	// (10) and LeaderImbalanceCheckInterval (300 s) are Kafka's
	// leader.imbalance.per.broker.percentage and leader.imbalance.check.interval.seconds.
	DisableAutoLeaderRebalance         bool
	LeaderImbalancePerBrokerPercentage int
	LeaderImbalanceCheckInterval       time.Duration
	// Replication (issue #23), Kafka's keys and defaults.
	ReplicaLagTimeMax            time.Duration // replica.lag.time.max.ms: 30 s
	ReplicaFetchMaxBytes         int           // replica.fetch.max.bytes: 1 MiB per partition
	ReplicaFetchResponseMaxBytes int           // replica.fetch.response.max.bytes: 10 MiB per fetch
	ReplicaFetchMinBytes         int           // replica.fetch.min.bytes: 1
	ReplicaFetchWait             time.Duration // replica.fetch.wait.max.ms: 500 ms
	ReplicaFetchBackoff          time.Duration // replica.fetch.backoff.ms: 1 s
	NumReplicaFetchers           int           // num.replica.fetchers: 1
	HighWatermarkCheckpoint      time.Duration // replica.high.watermark.checkpoint.interval.ms: 5 s
	DataDir                      string        // log.dirs (the first directory): ./data
	Listen                       string        // listeners (PLAINTEXT://host:port): 127.0.0.1:9092; "" with Unix set = no TCP
	UnixPath                     string        // unix.socket.path (Sluice): <data dir>/sluice.sock; "-" = none

	NumPartitions          int   // num.partitions: 1
	DefaultReplication     int   // default.replication.factor: 1
	MessageMaxBytes        int64 // message.max.bytes: 1 MiB (the default max.message.bytes of topics)
	SocketRequestMaxBytes  int   // socket.request.max.bytes: 100 MiB
	AutoCreateTopics       bool  // auto.create.topics.enable: false
	OffsetsTopicPartitions int   // offsets.topic.num.partitions: 50

	// Consumer groups (groupcoord.go).
	OffsetsTopicReplication    int           // offsets.topic.replication.factor: 3 (the live brokers if fewer)
	OffsetsCommitTimeout       time.Duration // offsets.commit.timeout.ms: 5 s for a coordinator write to commit
	GroupInitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms: 3 s; negative = none
	GroupMinSessionTimeout     time.Duration // group.min.session.timeout.ms: 6 s
	GroupMaxSessionTimeout     time.Duration // group.max.session.timeout.ms: 30 min
	GroupMaxSize               int           // group.max.size: 0 = no limit

	SegmentBytes   int64         // log.segment.bytes: 1 GiB
	SegmentMs      time.Duration // log.roll.ms / log.roll.hours: 7 days
	SegmentJitter  time.Duration // log.roll.jitter.ms / log.roll.jitter.hours: 0
	RetentionMs    time.Duration // log.retention.ms / .minutes / .hours: 7 days
	RetentionBytes int64         // log.retention.bytes: -1
	RetentionCheck time.Duration // log.retention.check.interval.ms: 5 min
	// ProducerIDExpiration is producer.id.expiration.ms (1 day): an idempotent producer
	// idle this long is forgotten by a partition (its next batch, unless from sequence 0, is
	// UNKNOWN_PRODUCER_ID); ProducerIDExpirationCheck is how often (10 min).
	ProducerIDExpiration      time.Duration
	ProducerIDExpirationCheck time.Duration
	FlushMessages             int64         // log.flush.interval.messages: never
	FlushMs                   time.Duration // log.flush.interval.ms: never
	IndexIntervalBytes        int64         // log.index.interval.bytes: 4096
	IndexMaxBytes             int64         // log.index.size.max.bytes: 10 MiB
	WriteCaching              bool          // write.caching.default (Redpanda's name): false
	// WritebackBytes and PreallocateBytes (Sluice's own) tune how an active segment meets the
	// disk: writeback started every this many appended bytes, and disk blocks reserved this far
	// ahead; -1 turns either off. See segment.Options for why (4 and 64 MiB).
	WritebackBytes   int64 // log.writeback.bytes
	PreallocateBytes int64 // log.preallocate.bytes
	// MaxOpenFiles (Sluice's own, as RocksDB's max_open_files) bounds the log files of sealed
	// segments open at once, across every partition; the least recently read are closed and
	// reopened by the next read (segment.FileCache). Active segments' files and those readers
	// hold are not counted. 0, the default, takes an eighth of RLIMIT_NOFILE (at least 64).
	MaxOpenFiles int64 // log.max.open.files
	// SharedMemoryBytes (Sluice's own) is the largest shared-memory region a producer on this
	// host may attach to its unix-socket connection (AttachMemory); -1 refuses them all.
	SharedMemoryBytes int64 // shared.memory.max.bytes: 64 MiB
	// ScrubBytesPerSec (Sluice's own) bounds the background scrub of sealed segments
	// (scrub.go), over all partitions together; -1 turns it off (and so does 0 in properties).
	// The default re-reads a broker's 1 TiB in about three days for a few reads of 1 MiB a
	// second: a small share of any disk's time.
	ScrubBytesPerSec int64         // log.scrub.bytes.per.sec: 4 MiB
	IdleTimeout      time.Duration // connections.max.idle.ms: 10 min
	ShutdownTimeout  time.Duration // controlled.shutdown... bound on Close: 30 s

	// Connection and request limits (net/server): MaxConnections unset is a quarter of the
	// open-file limit (see maxConnections); the per-address and per-listener limits are unset
	// (none) by default, the listeners being named plaintext (TCP) and unix.
	MaxConnections          int           // max.connections: RLIMIT_NOFILE/4
	MaxConnectionsPerIP     int           // max.connections.per.ip: unlimited
	PlaintextMaxConnections int           // listener.name.plaintext.max.connections: unlimited
	UnixMaxConnections      int           // listener.name.unix.max.connections: unlimited
	RequestTimeout          time.Duration // request.timeout.ms: 30 s from a frame's first byte to its last; -1 none
	QueuedMaxRequestBytes   int64         // queued.max.request.bytes: 100 MiB; -1 unbounded

	// LogRetryBackoff and LogRetryBackoffMax (Sluice's own, after the clients'
	// retry.backoff.ms and retry.backoff.max.ms) space the retries of what failed for want of
	// a resource: a log's recovery-point writes and index pages, and the reopening of a log
	// stopped by an I/O error (heal.go): the first after LogRetryBackoff, each next one after
	// twice the last, at most LogRetryBackoffMax.
	LogRetryBackoff    time.Duration // log.retry.backoff.ms: 1 s
	LogRetryBackoffMax time.Duration // log.retry.backoff.max.ms: 1 min

	// Disk space (Redpanda's states and ballast file; diskspace.go). Alert below the larger of
	// SpaceAlertFreeBytes and SpaceAlertFreePercent of the filesystem (-1 turns the percent
	// off); degraded (client produce refused) below SpaceMinFreeBytes, whose default (0) is
	// the smaller of 1 GiB and 2 % of the filesystem (-1: never degraded); a ballast file of
	// BallastBytes, at most 2 % of the filesystem (-1: none), released when degraded.
	SpaceAlertFreeBytes   int64 // storage.space.alert.free.bytes: 0
	SpaceAlertFreePercent int64 // storage.space.alert.free.percent: 5
	SpaceMinFreeBytes     int64 // storage.space.min.free.bytes: min(1 GiB, 2 % of the filesystem)
	BallastBytes          int64 // storage.ballast.bytes: 64 MiB

	Logger *slog.Logger

	// logFS does the partition logs' file operations; nil means the operating system. Tests
	// set it to inject slow or failing disks.
	logFS vfs.FS
	// openFileLimit is how many files the process may have open; 0 means RLIMIT_NOFILE's.
	// Tests set a small number.
	openFileLimit uint64
	// spaceStat reads the data directory's free space; nil means statfs. Tests inject
	// readings; spaceCheckInterval (0: 1 s) is how often the monitor reads it.
	spaceStat          spaceReader
	spaceCheckInterval time.Duration

	// Test seams: the listen function of every listener (PLAINTEXT, unix, CONTROLLER), the clock of
	// broker sessions, and the controller's dial function. nil: net.Listen, real time, net.Dialer.
	listen         func(network, addr string) (net.Listener, error)
	clock          cluster.Clock
	controllerDial cluster.DialFunc
	// replicaDial (issue #23) dials a leader's PLAINTEXT listener for this broker's replica
	// fetchers; nil: net.Dialer. Tests inject partitions, delays and one-way loss with it.
	replicaDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Roles is process.roles: what a node runs. The zero value is both (KRaft's combined mode).
type Roles uint8

const (
	RoleBroker     Roles = 1 << iota // hosts partitions and serves clients
	RoleController                   // votes in the controller quorum
)

// Broker reports whether the node hosts partitions (zero Roles: yes).
func (r Roles) Broker() bool { return r == 0 || r&RoleBroker != 0 }

// Controller reports whether the node is a controller voter (zero Roles: yes).
func (r Roles) Controller() bool { return r == 0 || r&RoleController != 0 }

// String is process.roles' form.
func (r Roles) String() string {
	switch {
	case r.Broker() && r.Controller():
		return "broker,controller"
	case r.Broker():
		return "broker"
	}
	return "controller"
}

// DefaultConfig returns the defaults: a single node with data in ./data, TCP on
// 127.0.0.1:9092 and a unix socket in the data directory.
func DefaultConfig() Config {
	return Config{
		DataDir:                            "data",
		Listen:                             "127.0.0.1:9092",
		NumPartitions:                      1,
		DefaultReplication:                 1,
		MessageMaxBytes:                    1 << 20,
		SocketRequestMaxBytes:              wire.MaxRequestBytes,
		OffsetsTopicPartitions:             50,
		OffsetsTopicReplication:            3,
		OffsetsCommitTimeout:               5 * time.Second,
		GroupInitialRebalanceDelay:         3 * time.Second,
		GroupMinSessionTimeout:             6 * time.Second,
		GroupMaxSessionTimeout:             30 * time.Minute,
		SegmentBytes:                       1 << 30,
		SegmentMs:                          7 * 24 * time.Hour,
		RetentionMs:                        7 * 24 * time.Hour,
		RetentionBytes:                     -1,
		RetentionCheck:                     5 * time.Minute,
		ProducerIDExpiration:               24 * time.Hour,
		ProducerIDExpirationCheck:          10 * time.Minute,
		FlushMessages:                      math.MaxInt64,
		FlushMs:                            cluster.Forever,
		IndexIntervalBytes:                 4096,
		IndexMaxBytes:                      10 << 20,
		WritebackBytes:                     segment.Defaults.WritebackBytes,
		SharedMemoryBytes:                  64 << 20,
		ScrubBytesPerSec:                   4 << 20,
		PreallocateBytes:                   segment.Defaults.PreallocateBytes,
		IdleTimeout:                        10 * time.Minute,
		LogRetryBackoff:                    segment.Defaults.RetryBackoff,
		LogRetryBackoffMax:                 segment.Defaults.RetryBackoffMax,
		RequestTimeout:                     server.DefaultRequestTimeout,
		QueuedMaxRequestBytes:              server.DefaultQueuedMaxRequestBytes,
		ShutdownTimeout:                    30 * time.Second,
		ControllerListenerName:             "CONTROLLER",
		HeartbeatInterval:                  2 * time.Second,
		SessionTimeout:                     9 * time.Second,
		LeaderImbalancePerBrokerPercentage: 10,
		LeaderImbalanceCheckInterval:       300 * time.Second,
		SpaceAlertFreePercent:              5,
		BallastBytes:                       64 << 20,

		ReplicaLagTimeMax:            30 * time.Second,
		ReplicaFetchMaxBytes:         1 << 20,
		ReplicaFetchResponseMaxBytes: 10 << 20,
		ReplicaFetchMinBytes:         1,
		ReplicaFetchWait:             500 * time.Millisecond,
		ReplicaFetchBackoff:          time.Second,
		NumReplicaFetchers:           1,
		HighWatermarkCheckpoint:      5 * time.Second,
	}
}

// unixPath resolves the unix socket path: default in the data directory, "-" for none.
func (c Config) unixPath() string {
	switch c.UnixPath {
	case "":
		return filepath.Join(c.DataDir, "sluice.sock")
	case "-":
		return ""
	}
	return c.UnixPath
}

// topicDefaults are the broker-level defaults every topic config falls back to.
func (c Config) topicDefaults() cluster.TopicConfig {
	d := cluster.DefaultTopicConfig()
	d.SegmentBytes = c.SegmentBytes
	d.SegmentTime = c.SegmentMs
	d.SegmentJitter = c.SegmentJitter
	d.Retention = c.RetentionMs
	d.RetentionBytes = c.RetentionBytes
	d.FlushMessages = c.FlushMessages
	d.FlushInterval = c.FlushMs
	d.IndexIntervalBytes = c.IndexIntervalBytes
	d.SegmentIndexBytes = c.IndexMaxBytes
	d.MaxMessageBytes = c.MessageMaxBytes
	d.WriteCaching = c.WriteCaching
	d.UncleanLeaderElect = c.UncleanLeaderElection
	return d
}
