package broker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/cluster"
)

// The broker's part in the cluster: which node it is (the node id, recorded in the data
// directory), the controller it runs (a voter or, for process.roles=broker, a raft non-voter on
// its CONTROLLER listener), its registration and heartbeats, and its controlled shutdown.

// metaPropertiesFile is Kafka's <log.dirs>/meta.properties: cluster.id, node.id and version,
// written once the cluster id is known; a data directory of another cluster is refused.
const metaPropertiesFile = "meta.properties"

// metaProperties is meta.properties as read; zero fields were absent.
type metaProperties struct {
	clusterID string
	nodeID    int32
	hasNodeID bool
}

func readMetaProperties(dataDir string) (metaProperties, bool, error) {
	path := filepath.Join(dataDir, metaPropertiesFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return metaProperties{}, false, nil
	}
	if err != nil {
		return metaProperties{}, false, fmt.Errorf("broker: %w", err)
	}
	var mp metaProperties
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "cluster.id":
			mp.clusterID = strings.TrimSpace(v)
		case "node.id":
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil || n < 0 {
				return metaProperties{}, false, fmt.Errorf("broker: %s: node.id %q is not a node id", path, strings.TrimSpace(v))
			}
			mp.nodeID, mp.hasNodeID = int32(n), true
		}
	}
	return mp, true, nil
}

func writeMetaProperties(dataDir, clusterID string, nodeID int32) error {
	body := fmt.Sprintf("#\n#%s\ncluster.id=%s\nnode.id=%d\nversion=1\n", time.Now().UTC().Format(time.RFC1123), clusterID, nodeID)
	return writeFileSync(filepath.Join(dataDir, metaPropertiesFile), []byte(body))
}

// resolveNodeID is node.id when set; else the id recorded in the data directory
// (meta.properties, or for a data directory made before it existed the single voter of its raft
// state); else the configured default. A cluster (Voters) needs it set or recorded.
func resolveNodeID(cfg Config) (int32, error) {
	if cfg.NodeIDSet {
		return cfg.NodeID, nil
	}
	mp, ok, err := readMetaProperties(cfg.DataDir)
	if err != nil {
		return 0, err
	}
	if ok && mp.hasNodeID {
		return mp.nodeID, nil
	}
	id, ok, err := cluster.RecordedNodeID(filepath.Join(cfg.DataDir, "meta"))
	if err != nil {
		return 0, fmt.Errorf("broker: %w", err)
	}
	if ok {
		return id, nil
	}
	if cfg.Voters != nil {
		return 0, fmt.Errorf("broker: node.id is not set and the data directory %s records none: controller.quorum.voters %s needs it", cfg.DataDir, cluster.FormatVoters(cfg.Voters))
	}
	return cfg.NodeID, nil
}

// checkNodeID refuses node.id set to another id than the data directory records.
func checkNodeID(cfg Config) error {
	mp, ok, err := readMetaProperties(cfg.DataDir)
	if err != nil || !ok || !mp.hasNodeID || mp.nodeID == cfg.NodeID {
		return err
	}
	return fmt.Errorf("broker: node.id is %d, but the data directory %s belongs to node %d", cfg.NodeID, cfg.DataDir, mp.nodeID)
}

// openController opens the cluster controller: alone without Voters (today's single node), else
// a voter, or a non-voter for process.roles=broker, on the CONTROLLER listener.
func (b *Broker) openController() (*cluster.Controller, error) {
	cfg := b.cfg
	ccfg := cluster.Config{
		NodeID:         cfg.NodeID,
		Dir:            filepath.Join(cfg.DataDir, "meta"),
		Logger:         b.logger,
		SessionTimeout: cfg.SessionTimeout,
		Clock:          cfg.clock,
		Dial:           cfg.controllerDial,

		AutoLeaderRebalance:                !cfg.DisableAutoLeaderRebalance,
		LeaderImbalancePerBrokerPercentage: cfg.LeaderImbalancePerBrokerPercentage,
		LeaderImbalanceCheckInterval:       cfg.LeaderImbalanceCheckInterval,
	}
	if cfg.Voters != nil {
		ccfg.Voters = cfg.Voters
		ccfg.NonVoter = !cfg.Roles.Controller()
		if cfg.ControllerListen != "" {
			ccfg.Advertised = cfg.AdvertisedControllerListen
		}
		addr := cfg.ControllerListen
		if addr == "" {
			if !ccfg.NonVoter {
				return nil, fmt.Errorf("broker: controller.quorum.voters %s needs a %s listener for node %d (listeners=...,%s://host:port)",
					cluster.FormatVoters(cfg.Voters), cfg.ControllerListenerName, cfg.NodeID, cfg.ControllerListenerName)
			}
			// A broker-only node follows the metadata as a raft non-voter: it needs an address of
			// its own, on the PLAINTEXT listener's host.
			host, _, err := net.SplitHostPort(nonZero(cfg.AdvertisedListen, cfg.Listen))
			if err != nil {
				host = "127.0.0.1"
			}
			addr = net.JoinHostPort(host, "0")
		}
		listen := cfg.listen
		if listen == nil {
			listen = net.Listen
		}
		ln, err := listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("broker: %s listener: %w", cfg.ControllerListenerName, err)
		}
		ccfg.Listener = ln
	}
	return cluster.Open(ccfg)
}

// checkCluster waits for the cluster id, refuses a data directory of another cluster, and
// records the cluster and node ids in meta.properties.
func (b *Broker) checkCluster(ctx context.Context) error {
	id, err := b.ctrl.AwaitClusterID(ctx)
	if err != nil {
		return err
	}
	mp, ok, err := readMetaProperties(b.cfg.DataDir)
	if err != nil {
		return err
	}
	if ok && mp.clusterID != "" && mp.clusterID != id {
		return fmt.Errorf("broker: data directory %s belongs to cluster %s, this cluster is %s", b.cfg.DataDir, mp.clusterID, id)
	}
	if ok && mp.clusterID == id && mp.hasNodeID && mp.nodeID == b.cfg.NodeID {
		return nil
	}
	if err := writeMetaProperties(b.cfg.DataDir, id, b.cfg.NodeID); err != nil {
		return fmt.Errorf("broker: record the cluster id: %w", err)
	}
	b.logger.Info("data directory recorded", "cluster.id", id, "node.id", b.cfg.NodeID, "file", filepath.Join(b.cfg.DataDir, metaPropertiesFile))
	return nil
}

// register records this broker's endpoints with the active controller and starts heartbeating
// (broker.heartbeat.interval.ms). The endpoint is advertised.listeners' PLAINTEXT address, else
// the bound one.
func (b *Broker) register() error {
	info := cluster.BrokerInfo{ID: b.cfg.NodeID}
	if a, ok := b.srv.Addr().(*net.TCPAddr); ok && a != nil {
		info.Host, info.Port = a.IP.String(), int32(a.Port)
	}
	if adv := b.cfg.AdvertisedListen; adv != "" {
		host, port, err := net.SplitHostPort(adv)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			return fmt.Errorf("broker: advertised.listeners %q: want host:port", adv)
		}
		info.Host, info.Port = host, int32(p)
	}
	if a := b.srv.UnixAddr(); a != nil {
		info.UnixSocket = b.advertisedUnixPath(a.String())
	}
	if !b.cfg.Roles.Broker() {
		return nil // a controller-only node hosts no partitions
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	m, err := b.ctrl.Register(ctx, cluster.MemberConfig{Info: info, HeartbeatInterval: b.cfg.HeartbeatInterval})
	if err != nil {
		return err
	}
	b.member = m
	return nil
}

// controlledShutdown moves this broker's leaderships away before it stops serving, bounded by
// ctx, unless controlled.shutdown.enable=false. A failure is logged: the session timeout then
// fences the broker instead.
func (b *Broker) controlledShutdown(ctx context.Context) {
	if b.member == nil || b.cfg.DisableControlledShutdown {
		return
	}
	// Waiting longer than a session timeout gains nothing: by then the controller would have
	// fenced the broker and moved its leaderships anyway.
	ctx, cancel := context.WithTimeout(ctx, b.cfg.SessionTimeout)
	defer cancel()
	t0 := time.Now()
	if err := b.member.ControlledShutdown(ctx); err != nil {
		b.logger.Warn("controlled shutdown incomplete: the controller fences this broker when its session times out", "err", err)
		return
	}
	b.logger.Info("controlled shutdown: leaderships moved", "took", time.Since(t0).Round(time.Millisecond))
}
