package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// Config is what every client (Producer, Consumer, Admin) needs to reach a cluster.
type Config struct {
	// Brokers is bootstrap.servers: addresses, "host:port" or "unix:///path", tried in order,
	// each until one answers; once the client knows the cluster it reaches every broker at the
	// address the metadata gives, the bootstrap list only when none of those answers. When the
	// first bootstrap address is a unix socket, the client reaches every broker through the
	// unix socket it advertises (a producer on the broker's host), else through its TCP
	// address.
	Brokers []string
	// Dial opens every connection the client makes (nil: a net.Dialer): tests cut, delay or
	// drop links with it.
	Dial DialFunc
	// ClientID is sent with every request (client.id).
	ClientID string
	// MetadataMaxAge is metadata.max.age.ms: metadata is refreshed at least this often (5 min).
	MetadataMaxAge time.Duration
	// RequestTimeout is request.timeout.ms: how long one request may take (30 s).
	RequestTimeout time.Duration
	// Logger receives connection events (slog.Default if nil).
	Logger *slog.Logger
	// SharedMemoryBytes (Sluice's own) is the size of the shared-memory region a Producer whose
	// bootstrap address is a unix socket keeps its batch buffers in (SharedRegion): its
	// batches are built there, and its connections over unix sockets attach the region, so
	// that a Produce request carries pointers to its batches instead of their bytes. Batches
	// that find no free buffer in it are built and sent as usual. A broker that refuses the
	// region (not Linux, or a smaller limit) leaves the connection as it was. A Producer's
	// default (zero) holds a buffer for every batch BufferMemory holds (each buffer is
	// batch.size, or more with a codec, plus a 64-byte guard), at most 64 MiB (the broker's
	// default limit); negative: none. Other clients ignore it.
	SharedMemoryBytes int

	// region is the Producer's SharedRegion, attached to every connection over a unix socket.
	region *SharedRegion
}

// defaultSharedMemoryLimit is the broker's default shared.memory.max.bytes.
const defaultSharedMemoryLimit = 64 << 20

func (c Config) withDefaults() Config {
	if c.ClientID == "" {
		c.ClientID = "sluice-go"
	}
	if c.MetadataMaxAge <= 0 {
		c.MetadataMaxAge = 5 * time.Minute
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// retryBackoff is KIP-580's exponential backoff, shared by the consumer and the producer: the
// wait before retrying after failures failures in a row (at least one) is base
// (retry.backoff.ms) doubled per failure after the first, at most ceiling
// (retry.backoff.max.ms), times 0.8 + 0.4*jitter for a jitter in [0, 1): ±20 %, so that the
// clients of a broker that went away do not come back in step. A base of 0 is no wait, after
// any number of failures.
func retryBackoff(base, ceiling time.Duration, failures int, jitter float64) time.Duration {
	d := base
	for i := 1; i < failures && d > 0 && d < ceiling; i++ {
		if d > ceiling/2 {
			d = ceiling // and no overflow
		} else {
			d *= 2
		}
	}
	d = min(d, ceiling)
	j := float64(d) * (0.8 + 0.4*jitter)
	if j >= math.MaxInt64 {
		return math.MaxInt64 // a ceiling near the largest Duration: no wrap to a negative wait
	}
	return time.Duration(j)
}

// Errors of the cluster client.
var (
	// ErrNoBrokers: no broker answered (each one tried is named, with its error).
	ErrNoBrokers = errors.New("no broker answered")
	// ErrUnknownTopic: the cluster has no such topic (or partition). Producer.Send (after
	// max.block.ms), Consumer.PartitionsFor, Client.Topic and Admin's DescribeTopic,
	// AlterTopicConfigs and DeleteTopic all report a missing topic with it; Admin's errors
	// also wrap the broker's wire.ErrUnknownTopicOrPartition.
	ErrUnknownTopic    = errors.New("unknown topic or partition")
	ErrNoLeader        = errors.New("partition has no leader")
	ErrClientClosed    = errors.New("client: closed")
	errUnknownBrokerID = errors.New("client: unknown broker id")
)

// TopicMetadata is the client's view of one topic.
type TopicMetadata struct {
	Name       string
	Partitions []PartitionMetadata // indexed by partition
}

// PartitionMetadata is the client's view of one partition.
type PartitionMetadata struct {
	Partition   int32
	Leader      int32 // -1 if none
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
}

// metadata is an immutable snapshot of what the cluster told us.
type metadata struct {
	fetched time.Time
	brokers map[int32]wire.MetadataBroker
	topics  map[string]TopicMetadata
}

// partition returns a partition's metadata, and false if the snapshot does not know it.
func (md *metadata) partition(topic string, partition int32) (PartitionMetadata, bool) {
	tm, ok := md.topics[topic]
	if !ok || partition < 0 || int(partition) >= len(tm.Partitions) {
		return PartitionMetadata{}, false
	}
	return tm.Partitions[partition], true
}

// Client is a connection pool and metadata cache over a cluster; Producer, Consumer and Admin
// use it. It is safe for concurrent use.
//
// Ownership: mu guards conns and closed; meta is swapped atomically; refreshMu serialises
// metadata refreshes so a burst of NOT_LEADER errors costs one Metadata request.
type Client struct {
	cfg     Config
	useUnix bool

	mu     sync.Mutex
	conns  map[string]*Conn // by dial address
	noShm  map[string]bool  // addresses whose broker closed the connection on AttachMemory
	closed bool

	meta      atomic.Pointer[metadata]
	refreshMu sync.Mutex
}

// NewClient connects to one of the bootstrap brokers and loads the cluster's metadata.
func NewClient(ctx context.Context, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("%w: Config.Brokers is empty", ErrNoBrokers)
	}
	c := &Client{cfg: cfg, conns: map[string]*Conn{}, noShm: map[string]bool{}}
	if network, _, err := ParseAddress(cfg.Brokers[0]); err != nil {
		return nil, err
	} else {
		c.useUnix = network == "unix"
	}
	if err := c.RefreshMetadata(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Close closes every connection.
func (c *Client) Close() error {
	c.mu.Lock()
	conns := c.conns
	c.conns = map[string]*Conn{}
	c.closed = true
	c.mu.Unlock()
	for _, conn := range conns {
		_ = conn.Close()
	}
	return nil
}

// conn returns a live connection to addr, dialling if needed.
func (c *Client) conn(ctx context.Context, addr string) (*Conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClientClosed
	}
	if conn := c.conns[addr]; conn != nil && !conn.isClosed() {
		c.mu.Unlock()
		return conn, nil
	}
	c.mu.Unlock()
	conn, err := c.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if c.cfg.region != nil && conn.unix != nil && !c.noSharedMemory(addr) {
		if conn, err = c.attach(ctx, addr, conn); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = conn.Close()
		return nil, ErrClientClosed
	}
	if old := c.conns[addr]; old != nil && !old.isClosed() {
		_ = conn.Close() // another caller won the race
		return old, nil
	}
	c.conns[addr] = conn
	return conn, nil
}

// attach attaches the client's shared-memory region to conn, a new connection to addr. A broker
// that does not know AttachMemory closes the connection; then attach dials again, asks the
// broker what it supports, and either tries once more (the connection broke for another
// reason) or never asks that address again. It returns the connection to use, with or without
// the region; an error only if it could not dial again.
func (c *Client) attach(ctx context.Context, addr string, conn *Conn) (*Conn, error) {
	err := conn.AttachSharedMemory(ctx, c.cfg.region)
	if err == nil || !conn.isClosed() {
		if err != nil {
			c.cfg.Logger.Info("sluice client: batches go through the socket", "broker", addr, "err", err)
		}
		return conn, nil
	}
	if conn, err = c.dial(ctx, addr); err != nil {
		return nil, err
	}
	if !conn.supports(wire.AttachMemory) {
		c.cfg.Logger.Info("sluice client: the broker does not know shared memory; batches go through the socket", "broker", addr)
		c.mu.Lock()
		c.noShm[addr] = true
		c.mu.Unlock()
		return conn, nil
	}
	if err := conn.AttachSharedMemory(ctx, c.cfg.region); err != nil {
		c.cfg.Logger.Info("sluice client: batches go through the socket", "broker", addr, "err", err)
		if conn.isClosed() {
			return c.dial(ctx, addr)
		}
	}
	return conn, nil
}

// dial opens a connection to addr through Config.Dial and learns the versions the broker
// speaks (ApiVersions), each within request.timeout.ms.
func (c *Client) dial(ctx context.Context, addr string) (*Conn, error) {
	return dialBounded(ctx, c.cfg.Dial, addr, c.cfg.ClientID, c.cfg.RequestTimeout)
}

// dialBounded dials addr and asks the broker its api versions (Conn.Version), the dial and
// the question each bounded by timeout: a broker that accepts and never answers fails naming
// its address (NoAnswerError).
func dialBounded(ctx context.Context, dial DialFunc, addr, clientID string, timeout time.Duration) (*Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	conn, err := DialWith(dctx, dial, addr, clientID)
	cancel()
	if err != nil {
		return nil, err
	}
	if err := conn.negotiate(ctx, timeout); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// noBrokersErr is ErrNoBrokers naming each address tried with its error.
func noBrokersErr(addrs []string, errs []error) error {
	if len(errs) == 0 {
		return fmt.Errorf("%w (tried %v)", ErrNoBrokers, addrs)
	}
	return fmt.Errorf("%w: %w", ErrNoBrokers, errors.Join(errs...))
}

// supports reports whether key is among the api ranges a broker advertised.
func supports(apis []wire.APIVersionRange, key wire.APIKey) bool {
	for _, a := range apis {
		if a.APIKey == key {
			return true
		}
	}
	return false
}

// noSharedMemory reports whether the broker at addr closed a connection that asked for a
// shared-memory region.
func (c *Client) noSharedMemory(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.noShm[addr]
}

// brokerAddr is how this client reaches broker b.
func (c *Client) brokerAddr(b wire.MetadataBroker) string {
	if c.useUnix && b.UnixPath != "" {
		return "unix://" + b.UnixPath
	}
	return b.Host + ":" + strconv.Itoa(int(b.Port))
}

// BrokerConn returns the connection to broker id.
func (c *Client) BrokerConn(ctx context.Context, id int32) (*Conn, error) {
	md := c.meta.Load()
	b, ok := md.brokers[id]
	if !ok {
		return nil, fmt.Errorf("%w: %d", errUnknownBrokerID, id)
	}
	return c.conn(ctx, c.brokerAddr(b))
}

// candidates lists the addresses to try for a request any broker can answer: the known
// brokers in random order (the load spread), then the bootstrap list in its order.
func (c *Client) candidates() []string {
	var addrs []string
	if md := c.meta.Load(); md != nil {
		for _, b := range md.brokers {
			addrs = append(addrs, c.brokerAddr(b))
		}
		rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	}
	for _, a := range c.cfg.Brokers {
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// anyConn returns a connection to some broker: a known one, else a bootstrap address.
func (c *Client) anyConn(ctx context.Context) (*Conn, error) {
	addrs := c.candidates()
	var errs []error
	for _, a := range addrs {
		conn, err := c.conn(ctx, a)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, noBrokersErr(addrs, errs)
}

// Call sends req to any broker (metadata and admin requests): the candidates in turn, each
// until one answers within request.timeout.ms. A broker that fails or does not answer
// loses its connection, so the next call dials it afresh.
func (c *Client) Call(ctx context.Context, req wire.Request, resp wire.Response) error {
	addrs := c.candidates()
	var errs []error
	for _, a := range addrs {
		conn, err := c.conn(ctx, a)
		if err == nil {
			if err = conn.callWithin(ctx, c.cfg.RequestTimeout, req, resp); err == nil {
				return nil
			}
			var code wire.ErrorCode
			if _, encode := errors.AsType[*wire.EncodeError](err); encode || errors.As(err, &code) || errors.Is(err, wire.ErrShortBuffer) {
				return err // refused before sending, or an answer: the request is at fault, not the broker
			}
			_ = conn.Close()
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return noBrokersErr(addrs, errs)
}

// RefreshMetadata reloads the metadata of every topic.
func (c *Client) RefreshMetadata(ctx context.Context) error {
	asked := time.Now()
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	if md := c.meta.Load(); md != nil && md.fetched.After(asked) {
		return nil // another caller refreshed while we waited: one request serves the burst
	}
	var resp wire.MetadataResponse
	if err := c.Call(ctx, &wire.MetadataRequest{}, &resp); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	md := &metadata{fetched: time.Now(), brokers: map[int32]wire.MetadataBroker{}, topics: map[string]TopicMetadata{}}
	for _, b := range resp.Brokers {
		md.brokers[b.NodeID] = b
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != wire.NoError {
			continue
		}
		sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
		if !densePartitions(t.Partitions) {
			// Partitions are picked by number in [0, count): a topic whose ids are not
			// exactly those (a broken broker) is left out, as if it had an error.
			c.cfg.Logger.Warn("sluice client: metadata with partition ids that are not 0 to n-1; topic ignored", "topic", t.Topic)
			continue
		}
		tm := TopicMetadata{Name: t.Topic, Partitions: make([]PartitionMetadata, len(t.Partitions))}
		for i, p := range t.Partitions {
			tm.Partitions[i] = PartitionMetadata{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR}
		}
		md.topics[t.Topic] = tm
	}
	// A broker's metadata may lag the leadership the client already knows of (a leader hint,
	// or a broker further along the metadata log): a partition keeps the leader of the newer
	// epoch, as Kafka's client does, so that a refresh never sends it back to an old leader.
	for {
		old := c.meta.Load()
		keepNewerLeaders(old, md)
		if c.meta.CompareAndSwap(old, md) {
			return nil
		}
	}
}

// keepNewerLeaders gives md's partitions old's leader where old's leader epoch is newer and
// its broker known.
func keepNewerLeaders(old, md *metadata) {
	if old == nil {
		return
	}
	for name, tm := range md.topics {
		was, ok := old.topics[name]
		if !ok || len(was.Partitions) != len(tm.Partitions) {
			continue
		}
		for i := range tm.Partitions {
			p, w := &tm.Partitions[i], was.Partitions[i]
			if w.Leader < 0 || w.LeaderEpoch < 0 || w.LeaderEpoch <= p.LeaderEpoch {
				continue
			}
			b, known := md.brokers[w.Leader]
			if !known {
				if b, known = old.brokers[w.Leader]; !known {
					continue
				}
				md.brokers[w.Leader] = b
			}
			p.Leader, p.LeaderEpoch = w.Leader, w.LeaderEpoch
		}
	}
}

// densePartitions reports whether sorted partitions are numbered exactly 0 to len-1.
func densePartitions(ps []wire.MetadataPartition) bool {
	for i, p := range ps {
		if p.Partition != int32(i) {
			return false
		}
	}
	return true
}

// Topic returns a topic's metadata, refreshing when the topic is unknown or the cache is older
// than metadata.max.age.ms.
func (c *Client) Topic(ctx context.Context, name string) (TopicMetadata, error) {
	md := c.meta.Load()
	t, ok := md.topics[name]
	if ok && time.Since(md.fetched) < c.cfg.MetadataMaxAge {
		return t, nil
	}
	if err := c.RefreshMetadata(ctx); err != nil {
		if ok {
			return t, nil // stale beats nothing
		}
		return TopicMetadata{}, err
	}
	if t, ok = c.meta.Load().topics[name]; !ok {
		return TopicMetadata{}, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	return t, nil
}

// Leader returns the leader of a partition and a connection to it.
func (c *Client) Leader(ctx context.Context, topic string, partition int32) (int32, *Conn, error) {
	leader, _, err := c.LeaderFor(ctx, topic, partition)
	if err != nil {
		return -1, nil, err
	}
	conn, err := c.BrokerConn(ctx, leader)
	return leader, conn, err
}

// InvalidateMetadata makes the next lookup refresh: a broker answered NOT_LEADER_OR_FOLLOWER or
// UNKNOWN_TOPIC_OR_PARTITION, or a connection failed. It marks the snapshot it loaded, and
// only if that is still the current one: a refresh stored since is newer than the failure,
// and putting the old snapshot back would undo it (the leaders it found, lost until the next
// refresh).
func (c *Client) InvalidateMetadata() {
	if md := c.meta.Load(); md != nil {
		stale := *md
		stale.fetched = time.Time{}
		c.meta.CompareAndSwap(md, &stale)
	}
}

// LeaderFor returns the leader of a partition and its epoch as the client knows them (a
// refresh if the topic is unknown or the cache old), or an error as Leader's.
func (c *Client) LeaderFor(ctx context.Context, topic string, partition int32) (leader, epoch int32, err error) {
	t, err := c.Topic(ctx, topic)
	if err != nil {
		return -1, -1, err
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return -1, -1, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, topic, partition)
	}
	pm := t.Partitions[partition]
	if pm.Leader < 0 {
		return -1, -1, fmt.Errorf("%w: %s-%d", ErrNoLeader, topic, partition)
	}
	return pm.Leader, pm.LeaderEpoch, nil
}

// applyLeaderHint takes a broker's word (KIP-951: a NOT_LEADER_OR_FOLLOWER or fenced-epoch
// answer naming the current leader) into the metadata at once, without waiting for a refresh:
// the partition's leader and epoch become the hint's if its epoch is newer than the cached
// one, and the hinted broker's endpoint is learnt from endpoints. It reports whether the
// cache changed. A hint whose broker is in neither endpoints nor the cache is ignored (the
// client could not reach it), and so is one no newer than what the client knows: brokers
// that disagree must not make a partition bounce between them.
func (c *Client) applyLeaderHint(topic string, partition int32, hint wire.LeaderHint, endpoints []wire.MetadataBroker) bool {
	if !hint.Known() {
		return false
	}
	for {
		md := c.meta.Load()
		if md == nil {
			return false
		}
		tm, ok := md.topics[topic]
		if !ok || partition < 0 || int(partition) >= len(tm.Partitions) {
			return false
		}
		pm := tm.Partitions[partition]
		if pm.LeaderEpoch >= 0 && hint.LeaderEpoch <= pm.LeaderEpoch {
			return false
		}
		broker, known := md.brokers[hint.LeaderID]
		for _, e := range endpoints {
			if e.NodeID == hint.LeaderID {
				broker, known = e, true
				break
			}
		}
		if !known {
			return false
		}
		next := &metadata{fetched: md.fetched, brokers: make(map[int32]wire.MetadataBroker, len(md.brokers)+1), topics: make(map[string]TopicMetadata, len(md.topics))}
		for id, b := range md.brokers {
			next.brokers[id] = b
		}
		next.brokers[broker.NodeID] = broker
		for name, t := range md.topics {
			next.topics[name] = t
		}
		parts := slices.Clone(tm.Partitions)
		parts[partition].Leader, parts[partition].LeaderEpoch = hint.LeaderID, hint.LeaderEpoch
		next.topics[topic] = TopicMetadata{Name: tm.Name, Partitions: parts}
		if c.meta.CompareAndSwap(md, next) {
			c.cfg.Logger.Debug("sluice client: leader hint", "topic", topic, "partition", partition, "leader", hint.LeaderID, "epoch", hint.LeaderEpoch)
			return true
		}
	}
}

// hintCarrying reports whether a broker's answer with code may name the partition's current
// leader (KIP-951).
func hintCarrying(code wire.ErrorCode) bool {
	return code == wire.ErrNotLeaderOrFollower || code == wire.ErrFencedLeaderEpoch || code == wire.ErrUnknownLeaderEpoch
}
