package broker

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/index"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// Config is one broker's configuration. Field comments give the Kafka property that sets each
// (ParseProperties reads a Kafka-style .properties file); zero values take the defaults below.
type Config struct {
	NodeID int32 // node.id (broker.id): 1; ids start at 1 (0 is unset here, and refused in properties)
	// NodeIDSet says NodeID was given (node.id), so that 0 can be a node id: unset, a data
	// directory that records its node id (one made before ids started at 0 says 1) keeps it.
	NodeIDSet bool

	// The cluster (issue #22). Roles zero is both broker and controller; Voters nil is a
	// quorum of this node alone (today's single-node broker).
	Roles                  Roles           // process.roles: broker,controller
	Voters                 []cluster.Voter // controller.quorum.voters: this node alone
	ControllerListen       string          // listeners' CONTROLLER://host:port: none ("" for a lone node)
	ControllerListenerName string          // controller.listener.names (the first): CONTROLLER
	AdvertisedListen       string          // advertised.listeners' PLAINTEXT host:port: Listen's
	HeartbeatInterval      time.Duration   // broker.heartbeat.interval.ms: 2 s
	SessionTimeout         time.Duration   // broker.session.timeout.ms: 9 s
	// DisableControlledShutdown is controlled.shutdown.enable=false: Close then stops without
	// first asking the controller to move this broker's leaderships away.
	DisableControlledShutdown bool
	DataDir                   string // log.dirs (the first directory): ./data
	Listen                    string // listeners (PLAINTEXT://host:port): 127.0.0.1:9092; "" with Unix set = no TCP
	UnixPath                  string // unix.socket.path (Sluice): <data dir>/sluice.sock; "-" = none

	NumPartitions          int   // num.partitions: 1
	DefaultReplication     int   // default.replication.factor: 1
	MessageMaxBytes        int64 // message.max.bytes: 1 MiB (the default max.message.bytes of topics)
	SocketRequestMaxBytes  int   // socket.request.max.bytes: 100 MiB
	AutoCreateTopics       bool  // auto.create.topics.enable: false
	OffsetsTopicPartitions int   // offsets.topic.num.partitions: 50

	SegmentBytes       int64         // log.segment.bytes: 1 GiB
	SegmentMs          time.Duration // log.roll.ms / log.roll.hours: 7 days
	SegmentJitter      time.Duration // log.roll.jitter.ms / log.roll.jitter.hours: 0
	RetentionMs        time.Duration // log.retention.ms / .minutes / .hours: 7 days
	RetentionBytes     int64         // log.retention.bytes: -1
	RetentionCheck     time.Duration // log.retention.check.interval.ms: 5 min
	FlushMessages      int64         // log.flush.interval.messages: never
	FlushMs            time.Duration // log.flush.interval.ms: never
	IndexIntervalBytes int64         // log.index.interval.bytes: 4096
	IndexMaxBytes      int64         // log.index.size.max.bytes: 10 MiB
	WriteCaching       bool          // write.caching.default (Redpanda's name): false
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

	// Test seams (the quorum stream's): the CONTROLLER listener's listen function, the clock of
	// broker sessions, and the controller's dial function. nil: net.Listen, real time, net.Dialer.
	listen         func(network, addr string) (net.Listener, error)
	clock          cluster.Clock
	controllerDial cluster.DialFunc
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
		NodeID:                 1,
		DataDir:                "data",
		Listen:                 "127.0.0.1:9092",
		NumPartitions:          1,
		DefaultReplication:     1,
		MessageMaxBytes:        1 << 20,
		SocketRequestMaxBytes:  wire.MaxRequestBytes,
		OffsetsTopicPartitions: 50,
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * time.Hour,
		RetentionMs:            7 * 24 * time.Hour,
		RetentionBytes:         -1,
		RetentionCheck:         5 * time.Minute,
		FlushMessages:          math.MaxInt64,
		FlushMs:                cluster.Forever,
		IndexIntervalBytes:     4096,
		IndexMaxBytes:          10 << 20,
		WritebackBytes:         segment.Defaults.WritebackBytes,
		SharedMemoryBytes:      64 << 20,
		ScrubBytesPerSec:       4 << 20,
		PreallocateBytes:       segment.Defaults.PreallocateBytes,
		IdleTimeout:            10 * time.Minute,
		LogRetryBackoff:        segment.Defaults.RetryBackoff,
		LogRetryBackoffMax:     segment.Defaults.RetryBackoffMax,
		RequestTimeout:         server.DefaultRequestTimeout,
		QueuedMaxRequestBytes:  server.DefaultQueuedMaxRequestBytes,
		ShutdownTimeout:        30 * time.Second,
		ControllerListenerName: "CONTROLLER",
		HeartbeatInterval:      2 * time.Second,
		SessionTimeout:         9 * time.Second,
		SpaceAlertFreePercent:  5,
		BallastBytes:           64 << 20,
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
	return d
}

// ParseProperties reads Kafka-style "key=value" lines (# and ! comments) into c, for the
// properties Sluice knows; an unknown or malformed property is an error, so a typo does not
// silently keep a default. A property given in several units takes Kafka's order, whatever the
// file's: log.retention.ms over .minutes over .hours, log.roll.ms over .hours, and
// log.roll.jitter.ms over .hours.
func ParseProperties(r io.Reader, c *Config) error {
	type entry struct {
		key, value string
		line       int
	}
	var entries []entry
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' || text[0] == '!' {
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		if !ok {
			key, value, ok = strings.Cut(text, ":")
		}
		if !ok {
			return fmt.Errorf("config line %d: %q is not key=value", line, text)
		}
		entries = append(entries, entry{strings.TrimSpace(key), strings.TrimSpace(value), line})
	}
	if err := sc.Err(); err != nil {
		return err
	}
	// The coarser units first, so that the finer one, set later, wins; file order otherwise.
	unitRank := func(key string) int {
		switch {
		case strings.HasSuffix(key, ".hours"):
			return 0
		case strings.HasSuffix(key, ".minutes"):
			return 1
		}
		return 2
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return unitRank(a.key) - unitRank(b.key) })
	for _, e := range entries {
		if err := c.Set(e.key, e.value); err != nil {
			return fmt.Errorf("config line %d: %w", e.line, err)
		}
	}
	return nil
}

// Set applies one Kafka property. A numeric value outside the property's range is refused
// with the range: Config's zero value means "unset", and withDefaults (broker.go) replaces a
// zero (or, for sizes and counts, a negative) field with the default, so a value let through
// here that withDefaults does not keep would silently become the default, and one it keeps
// that the broker cannot use would fail later (at startup, or in every produce).
func (c *Config) Set(key, value string) error {
	// long parses an integer property and checks it against r (see bounds).
	long := func(r bounds) (int64, error) {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not an integer", key, value)
		}
		if n == 0 && r.zero != "" {
			return 0, fmt.Errorf("%s: 0 is not supported: %s", key, r.zero)
		}
		if n < r.lo || n > r.hi {
			if r.why != "" {
				return 0, fmt.Errorf("%s: %d is out of range %s: %s", key, n, r, r.why)
			}
			return 0, fmt.Errorf("%s: %d is out of range %s", key, n, r)
		}
		if r.topic != "" {
			// The property is the broker-wide default of a topic config: the topic-level rule
			// applies to it too (segment.bytes at least 14, ...), by the same validation.
			if err := cluster.ValidateTopicConfigs(map[string]string{r.topic: strconv.FormatInt(n, 10)}); err != nil {
				return 0, fmt.Errorf("%s: %d is out of range as the default of topic config %s (%w)", key, n, r.topic, err)
			}
		}
		return n, nil
	}
	i64 := func(dst *int64, r bounds) error {
		n, err := long(r)
		if err != nil {
			return err
		}
		*dst = n
		return nil
	}
	// integer takes a count the broker later narrows (to int32 in requests and metadata,
	// int16 for a replication factor): a value outside [lo, hi] is refused here rather than
	// wrapped there.
	integer := func(dst *int, lo, hi int64) error {
		n, err := long(bounds{lo: lo, hi: hi})
		if err != nil {
			return err
		}
		*dst = int(n)
		return nil
	}
	// dur takes a count of unit; -1 (where r allows it) and counts too large for a Duration
	// become cluster.Forever.
	dur := func(dst *time.Duration, unit time.Duration, r bounds) error {
		n, err := long(r)
		if err != nil {
			return err
		}
		if n < 0 || n >= math.MaxInt64/int64(unit) {
			*dst = cluster.Forever
		} else {
			*dst = time.Duration(n) * unit
		}
		return nil
	}
	boolean := func(dst *bool) error {
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("%s: %q is not true or false", key, value)
		}
		*dst = b
		return nil
	}
	switch key {
	case "node.id", "broker.id":
		var n int
		if err := integer(&n, 0, math.MaxInt32); err != nil {
			return err
		}
		if n == 0 {
			// Config's zero NodeID means "unset", so 0 would silently become node 1 and clash
			// with a broker configured as 1. Taking 0 as given needs a migration for data
			// directories whose raft state already says node 1; until then it is refused.
			return fmt.Errorf("%s: 0 is not supported: Sluice's node ids start at 1", key)
		}
		c.NodeID = int32(n)
	case "log.dirs", "log.dir":
		dir := strings.TrimSpace(strings.Split(value, ",")[0])
		if dir == "" {
			// An empty DataDir is "unset": it would silently become ./data.
			return fmt.Errorf("%s: %q does not start with a directory (Sluice uses the first)", key, value)
		}
		c.DataDir = dir
	case "listeners":
		addr, err := parseListener(value)
		if err != nil {
			return err
		}
		c.Listen = addr
	case "unix.socket.path":
		c.UnixPath = value
	case "num.partitions":
		return integer(&c.NumPartitions, 1, math.MaxInt32)
	case "default.replication.factor":
		return integer(&c.DefaultReplication, 1, math.MaxInt16)
	case "message.max.bytes":
		// Kafka's [0, ...], but 0 refuses every batch; topic max.message.bytes caps it at 2^31-1.
		return i64(&c.MessageMaxBytes, bounds{lo: 1, hi: math.MaxInt32, topic: "max.message.bytes"})
	case "socket.request.max.bytes":
		return integer(&c.SocketRequestMaxBytes, 1, math.MaxInt32)
	case "auto.create.topics.enable":
		return boolean(&c.AutoCreateTopics)
	case "offsets.topic.num.partitions":
		return integer(&c.OffsetsTopicPartitions, 1, math.MaxInt32)
	case "log.segment.bytes":
		// The range is topic segment.bytes' [14, 2^31-1]: 14 is a record's overhead (Kafka's
		// minimum), and a segment's positions must fit the index's 32 bits.
		return i64(&c.SegmentBytes, bounds{lo: math.MinInt64, hi: math.MaxInt64, topic: "segment.bytes"})
	case "log.roll.ms":
		return dur(&c.SegmentMs, time.Millisecond, bounds{lo: 1, hi: math.MaxInt64, topic: "segment.ms"})
	case "log.roll.hours":
		return dur(&c.SegmentMs, time.Hour, bounds{lo: 1, hi: math.MaxInt32})
	case "log.roll.jitter.ms":
		return dur(&c.SegmentJitter, time.Millisecond, bounds{lo: 0, hi: math.MaxInt64, topic: "segment.jitter.ms"})
	case "log.roll.jitter.hours":
		return dur(&c.SegmentJitter, time.Hour, bounds{lo: 0, hi: math.MaxInt32})
	case "log.retention.ms":
		return dur(&c.RetentionMs, time.Millisecond, retentionTime(math.MaxInt64, "retention.ms"))
	case "log.retention.minutes":
		return dur(&c.RetentionMs, time.Minute, retentionTime(math.MaxInt32, ""))
	case "log.retention.hours":
		return dur(&c.RetentionMs, time.Hour, retentionTime(math.MaxInt32, ""))
	case "log.retention.bytes":
		// Any negative is unlimited, as in Kafka.
		return i64(&c.RetentionBytes, bounds{lo: math.MinInt64, hi: math.MaxInt64, topic: "retention.bytes",
			zero: unset("delete every segment, the active one too", "")})
	case "log.retention.check.interval.ms":
		return dur(&c.RetentionCheck, time.Millisecond, bounds{lo: 1, hi: math.MaxInt64})
	case "log.retry.backoff.ms":
		return dur(&c.LogRetryBackoff, time.Millisecond, bounds{lo: 1, hi: math.MaxInt64})
	case "log.retry.backoff.max.ms":
		return dur(&c.LogRetryBackoffMax, time.Millisecond, bounds{lo: 1, hi: math.MaxInt64})
	case "log.flush.interval.messages":
		return i64(&c.FlushMessages, bounds{lo: 1, hi: math.MaxInt64, topic: "flush.messages"})
	case "log.flush.interval.ms":
		// -1 is Sluice's "never" (Kafka's Long.MAX_VALUE, the default).
		return dur(&c.FlushMs, time.Millisecond, bounds{lo: -1, hi: math.MaxInt64,
			zero: unset("fsync at every check of the flusher", "1 is the nearest")})
	case "log.index.interval.bytes":
		return i64(&c.IndexIntervalBytes, bounds{lo: 1, hi: math.MaxInt32, topic: "index.interval.bytes",
			zero: unset("an index entry for every batch", "1 does the same")})
	case "log.index.size.max.bytes":
		// Topic segment.index.bytes is Kafka's [4, 2^31-1], but a writable index must hold one
		// entry of each index (index.Open*Index refuses it at startup otherwise).
		return i64(&c.IndexMaxBytes, bounds{lo: minIndexBytes, hi: math.MaxInt32, topic: "segment.index.bytes",
			why: fmt.Sprintf("a time index entry is %d bytes", index.TimeEntrySize)})
	case "write.caching.default", "write_caching_default":
		return boolean(&c.WriteCaching)
	case "log.writeback.bytes":
		return i64(&c.WritebackBytes, sluiceBytes("-1 turns writeback off"))
	case "log.preallocate.bytes":
		return i64(&c.PreallocateBytes, sluiceBytes("-1 turns preallocation off"))
	case "log.max.open.files":
		return i64(&c.MaxOpenFiles, bounds{lo: 0, hi: math.MaxInt32, why: "0 takes an eighth of the open-file limit"})
	case "shared.memory.max.bytes":
		return i64(&c.SharedMemoryBytes, sluiceBytes("-1 refuses every shared-memory region"))
	case "log.scrub.bytes.per.sec":
		n, err := long(bounds{lo: -1, hi: math.MaxInt64})
		if err != nil {
			return err
		}
		if n == 0 {
			n = -1 // 0 turns the scrub off, as -1 does (Config's 0 would be the default)
		}
		c.ScrubBytesPerSec = n
	case "connections.max.idle.ms":
		// -1: idle connections are never closed, as in Kafka.
		return dur(&c.IdleTimeout, time.Millisecond, bounds{lo: -1, hi: math.MaxInt64,
			zero: unset("close a connection as soon as it is idle", "-1 never closes idle connections")})
	case "storage.space.alert.free.bytes":
		return i64(&c.SpaceAlertFreeBytes, bounds{lo: 0, hi: math.MaxInt64}) // 0: only the percent
	case "storage.space.alert.free.percent":
		return i64(&c.SpaceAlertFreePercent, bounds{lo: -1, hi: 100,
			zero: "0 would be taken as unset (the default, 5); -1 turns the percent off"})
	case "storage.space.min.free.bytes":
		return i64(&c.SpaceMinFreeBytes, bounds{lo: -1, hi: math.MaxInt64,
			zero: "0 would be taken as unset (the default: the smaller of 1 GiB and 2 % of the filesystem); -1 is never degraded"})
	case "storage.ballast.bytes":
		return i64(&c.BallastBytes, sluiceBytes("-1 makes no ballast file"))
	case "max.connections":
		return integer(&c.MaxConnections, 1, math.MaxInt32)
	case "max.connections.per.ip":
		return integer(&c.MaxConnectionsPerIP, 1, math.MaxInt32)
	case "listener.name.plaintext.max.connections":
		return integer(&c.PlaintextMaxConnections, 1, math.MaxInt32)
	case "listener.name.unix.max.connections":
		return integer(&c.UnixMaxConnections, 1, math.MaxInt32)
	case "request.timeout.ms":
		return dur(&c.RequestTimeout, time.Millisecond, bounds{lo: -1, hi: math.MaxInt64,
			zero: unset("no time at all for a request", "-1 never closes a slow request")})
	case "queued.max.request.bytes":
		// Kafka's default -1 (unbounded) is allowed; Sluice's default is 100 MiB.
		return i64(&c.QueuedMaxRequestBytes, sluiceBytes("-1 leaves queued requests unbounded"))
	default:
		return fmt.Errorf("unknown property %q", key)
	}
	return nil
}

// bounds is the range of a numeric property, checked in this order: zero, when set, says why
// a 0 that Kafka accepts with a meaning of its own is refused (the Config field cannot tell it
// from unset, so it would silently become the default); then [lo, hi]; then, when topic is
// set, the rule of that topic config (the property is the broker-wide default of it).
type bounds struct {
	lo, hi int64
	topic  string
	zero   string
	why    string // why lo or hi, when they are Sluice's and not Kafka's
}

// String is the range, "..." standing for no upper bound, without the 0 that zero refuses.
func (r bounds) String() string {
	lo, hi := strconv.FormatInt(r.lo, 10), strconv.FormatInt(r.hi, 10)
	if r.hi == math.MaxInt64 {
		hi = "..."
	}
	if r.zero != "" && r.lo < 0 && r.hi > 0 {
		if r.lo == -1 {
			return "-1 or [1, " + hi + "]"
		}
		return "[" + lo + ", -1] or [1, " + hi + "]"
	}
	return "[" + lo + ", " + hi + "]"
}

// minIndexBytes is the smallest log.index.size.max.bytes: one entry of the larger index.
const minIndexBytes = max(index.OffsetEntrySize, index.TimeEntrySize)

// retentionTime is log.retention.ms and its .minutes and .hours forms: -1 keeps forever, as in
// Kafka; Kafka's 0 cannot be told from unset.
func retentionTime(hi int64, topic string) bounds {
	return bounds{lo: -1, hi: hi, topic: topic,
		zero: unset("delete every segment, the active one too", "log.retention.ms=1 is the nearest")}
}

// unset explains the refusal of a 0 to which Kafka gives a meaning, with an alternative.
func unset(kafka, instead string) string {
	s := "Kafka's 0 (" + kafka + ") cannot be told from unset (the default) in Sluice's Config"
	if instead != "" {
		s += "; " + instead
	}
	return s
}

// sluiceBytes is Sluice's own size properties: -1 turns the feature off, and 0, which would
// be taken as unset, is refused.
func sluiceBytes(off string) bounds {
	return bounds{lo: -1, hi: math.MaxInt64, zero: "0 would be taken as unset (the default); " + off}
}

// parseListener accepts "PLAINTEXT://host:port" (the first listener of a comma list) or
// "host:port".
func parseListener(v string) (string, error) {
	first := strings.TrimSpace(strings.Split(v, ",")[0])
	if _, rest, ok := strings.Cut(first, "://"); ok {
		first = rest
	}
	if _, _, err := net.SplitHostPort(first); err != nil {
		return "", fmt.Errorf("listeners: %q: %w", v, err)
	}
	return first, nil
}
