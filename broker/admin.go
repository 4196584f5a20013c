package broker

// Behavior: Metadata, CreateTopics, DeleteTopics, DescribeConfigs, AlterConfigs, ListOffsets.
//
// Metadata lists the brokers a client may use (registered and not fenced), the cluster id and
// the active controller, and per partition the leader (LEADER_NOT_AVAILABLE where there is
// none), its epoch, the replicas and the ISR, as this broker's committed metadata says.
//
// Topic administration goes through the controller (raft; a controller that is not the active
// one forwards, or answers NOT_CONTROLLER, retriable); a topic's partitions appear on this
// broker when the reconciler applies the committed change, and CreateTopics waits for that, this
// broker's metadata first (up to the request's timeout), so a client can produce as soon as it
// gets its answer. Partitions -1 and replication factor -1 take num.partitions and
// default.replication.factor; a replication factor of 0 is refused (INVALID_REPLICATION_FACTOR).
// ListOffsets is answered by the partition's leader only, as produce and fetch. AlterConfigs
// replaces a topic's overrides with the request's set (Kafka's non-incremental semantics).
// Metadata for an unknown topic answers UNKNOWN_TOPIC_OR_PARTITION, or creates it when
// auto.create.topics.enable is set and the client allows it.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
	"golang.org/x/sys/unix"
)

func (b *Broker) handleMetadata(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.MetadataRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	md := b.ctrl.Metadata()
	if req.Topics != nil && b.cfg.AutoCreateTopics && req.AllowAutoTopicCreation {
		for _, name := range req.Topics {
			if _, ok := md.Topic(name); !ok && cluster.ValidateTopicName(name) == nil && !cluster.IsInternalTopicName(name) {
				_ = b.createTopic(cluster.TopicSpec{Name: name, NumPartitions: -1, ReplicationFactor: -1}, 10*time.Second)
			}
		}
		md = b.ctrl.Metadata()
	}
	resp := &wire.MetadataResponse{Version: h.APIVersion, ControllerID: b.ctrl.ControllerID()}
	id := clusterID(md)
	resp.ClusterID = &id
	for _, br := range md.Brokers() {
		if brokerAlive(br) { // a fenced broker is not one a client should dial
			resp.Brokers = append(resp.Brokers, metadataBroker(br))
		}
	}
	describe := func(t cluster.TopicMeta) wire.MetadataTopic {
		mt := wire.MetadataTopic{Topic: t.Name, IsInternal: t.Internal}
		for _, pm := range t.Partitions {
			mp := wire.MetadataPartition{
				Partition: pm.Partition, Leader: pm.Leader, LeaderEpoch: pm.LeaderEpoch,
				Replicas: pm.Replicas, ISR: pm.ISR,
			}
			if pm.Leader == cluster.NoLeader {
				mp.ErrorCode = wire.ErrLeaderNotAvailable // Kafka's answer for a partition without a leader
			}
			if p := b.partition(t.Name, pm.Partition); p != nil && p.corrupt() {
				// This broker's replica only: the others' state is theirs (the scrub's marks
				// are not in the cluster metadata).
				mp.CorruptReplicas = []int32{b.cfg.NodeID}
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		return mt
	}
	if req.Topics == nil {
		for _, t := range md.Topics() {
			resp.Topics = append(resp.Topics, describe(t))
		}
	} else {
		for _, name := range req.Topics {
			t, ok := md.Topic(name)
			if !ok {
				code := wire.ErrUnknownTopicOrPartition
				if cluster.ValidateTopicName(name) != nil {
					code = wire.ErrInvalidTopicException
				}
				resp.Topics = append(resp.Topics, wire.MetadataTopic{Topic: name, ErrorCode: code})
				continue
			}
			resp.Topics = append(resp.Topics, describe(t))
		}
	}
	return respond(c, h, resp)
}

// createTopic asks the controller for the topic and waits until this broker hosts its
// partitions, so that a produce right after the answer finds them.
func (b *Broker) createTopic(spec cluster.TopicSpec, timeout time.Duration) error {
	if err := b.checkReplicationFactor(spec); err != nil {
		return err
	}
	if spec.NumPartitions < 0 && len(spec.Assignment) == 0 {
		spec.NumPartitions = int32(b.cfg.NumPartitions)
	}
	if spec.ReplicationFactor < 0 && len(spec.Assignment) == 0 {
		spec.ReplicationFactor = int16(b.cfg.DefaultReplication)
	}
	local := int(spec.NumPartitions) // a broker holds at most one replica of a partition
	if len(spec.Assignment) > 0 {
		local = 0
		for _, replicas := range spec.Assignment {
			if containsID(replicas, b.cfg.NodeID) {
				local++
			}
		}
	}
	if err := b.checkOpenFiles(local); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	t, err := b.ctrl.CreateTopic(ctx, spec)
	if err != nil {
		return err
	}
	return b.awaitHosted(ctx, t)
}

// checkReplicationFactor refuses a replication factor of 0 (Kafka's -1 takes
// default.replication.factor; the controller refuses the other bad values, naming the live
// brokers). An explicit assignment sets the factor itself.
func (b *Broker) checkReplicationFactor(spec cluster.TopicSpec) error {
	if spec.ReplicationFactor == 0 && len(spec.Assignment) == 0 {
		return fmt.Errorf("%w: %s: replication factor 0: give at least 1, or -1 for default.replication.factor (%d)",
			cluster.ErrInvalidReplicationFactor, spec.Name, b.cfg.DefaultReplication)
	}
	return nil
}

// requestedReplicationFactor is the replication factor a CreateTopics entry asks for: its
// assignment's (the fewest replicas of a partition), its own, or default.replication.factor. A
// validate-only create checks min.insync.replicas against it as the controller will.
func (b *Broker) requestedReplicationFactor(spec cluster.TopicSpec) int {
	switch {
	case len(spec.Assignment) > 0:
		rf := len(spec.Assignment[0])
		for _, r := range spec.Assignment[1:] {
			rf = min(rf, len(r))
		}
		return rf
	case spec.ReplicationFactor > 0:
		return int(spec.ReplicationFactor)
	}
	return int(b.cfg.DefaultReplication)
}

// replicaCount is a topic's replication factor: the fewest replicas of any of its partitions.
func replicaCount(t cluster.TopicMeta) int {
	rf := 0
	for i, p := range t.Partitions {
		if i == 0 || len(p.Replicas) < rf {
			rf = len(p.Replicas)
		}
	}
	return rf
}

// Each partition holds one file open, its active segment's log (its indexes are mapped and
// hold no descriptor). The rest of the limit is kept for the connections (max.connections:
// a quarter of the limit by default; where it is unbounded, a quarter of the limit at most
// openFileReserve), the sealed segments' files (log.max.open.files) and raft, checkpoints,
// standby segments and listeners (a sixteenth of the limit, at most fixedFileReserve).
const (
	filesPerPartition = 1
	openFileReserve   = 1024
	fixedFileReserve  = 64
)

// checkOpenFiles refuses n more partitions on this broker if, with those it hosts, they would
// need more open files than the process may have: their logs could not be opened, and the
// data directory could not start again until the limit was raised.
func (b *Broker) checkOpenFiles(n int) error {
	limit := b.cfg.openFileLimit
	if limit == 0 {
		limit = openFileLimit()
	}
	if limit == 0 || n <= 0 {
		return nil
	}
	b.mu.RLock()
	hosted := len(b.mu.partitions) + len(b.mu.unopened)
	b.mu.RUnlock()
	conns := min(uint64(openFileReserve), limit/4)
	if n := b.cfg.maxConnections(); n > 0 {
		conns = uint64(n)
	}
	reserve := conns + uint64(b.maxOpenFiles()) + min(fixedFileReserve, limit/16)
	need := uint64(filesPerPartition*(hosted+n)) + reserve
	if need <= limit {
		return nil
	}
	return fmt.Errorf("%w: %d more partitions would make %d on this broker, about %d open files (%d each and %d for connections and sealed segments, log.max.open.files); "+
		"the limit is %d: raise it (ulimit -n, systemd LimitNOFILE) or use fewer partitions",
		ErrOpenFileLimit, n, hosted+n, need, filesPerPartition, reserve, limit)
}

// maxOpenFiles is log.max.open.files, or its default: an eighth of the open-file limit, at
// least 64 (and 64 where the limit is unknown). An eighth, not more: with max.connections'
// quarter and a partition's one file, a 20,000-file limit still holds 12,000 partitions.
func (b *Broker) maxOpenFiles() int {
	if n := b.cfg.MaxOpenFiles; n > 0 {
		return int(n)
	}
	limit := b.cfg.openFileLimit
	if limit == 0 {
		limit = openFileLimit()
	}
	return int(max(limit/8, 64))
}

// openFileLimit is the process's RLIMIT_NOFILE (the soft limit, which the Go runtime raises to
// the hard one at start), or 0 if it cannot be read.
func openFileLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 0
	}
	return uint64(rl.Cur)
}

// awaitHosted waits until this broker's metadata has t (the controller that committed it may
// be another node, whose log this broker applies a moment later), applies it now (the
// reconciler would, a moment later) and checks that every local replica of t is open.
func (b *Broker) awaitHosted(ctx context.Context, t cluster.TopicMeta) error {
	updates, stop := b.ctrl.Subscribe()
	defer stop()
	for {
		md := b.ctrl.Metadata()
		if _, ok := md.TopicByID(t.ID); ok {
			if err := b.reconcile(md); err != nil {
				return err
			}
			break
		}
		select {
		case _, ok := <-updates:
			if !ok {
				return ErrClosed
			}
		case <-ctx.Done():
			return fmt.Errorf("%w: topic %s created, not in this broker's metadata yet", context.DeadlineExceeded, t.Name)
		}
	}
	for _, pm := range t.Partitions {
		if containsID(pm.Replicas, b.cfg.NodeID) && b.partition(t.Name, pm.Partition) == nil {
			return fmt.Errorf("%w: %s-%d not open yet", context.DeadlineExceeded, t.Name, pm.Partition)
		}
	}
	return ctx.Err()
}

func requestTimeout(ms int32) time.Duration {
	if ms <= 0 {
		return 30 * time.Second
	}
	return time.Duration(ms) * time.Millisecond
}

func errResult(topic string, err error) wire.TopicResult {
	r := wire.TopicResult{Topic: topic, ErrorCode: errorCode(err)}
	if err != nil {
		msg := err.Error()
		r.ErrorMessage = &msg
	}
	return r
}

func (b *Broker) handleCreateTopics(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.CreateTopicsRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	return b.async(c, h, func() wire.Encoder {
		resp := &wire.CreateTopicsResponse{}
		for _, t := range req.Topics {
			spec := cluster.TopicSpec{Name: t.Topic, NumPartitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
			if len(t.Configs) > 0 {
				spec.Configs = map[string]string{}
				for _, e := range t.Configs {
					if e.Value != nil {
						spec.Configs[e.Name] = *e.Value
					}
				}
			}
			for _, a := range t.Assignments {
				if a.Partition < 0 || int(a.Partition) > len(t.Assignments) {
					spec.Assignment = nil
					break
				}
				for len(spec.Assignment) <= int(a.Partition) {
					spec.Assignment = append(spec.Assignment, nil)
				}
				spec.Assignment[a.Partition] = a.Replicas
			}
			var err error
			switch {
			case cluster.IsInternalTopicName(t.Topic):
				err = fmt.Errorf("%w: %q: names starting with \"__\" are reserved for internal topics", cluster.ErrInvalidTopic, t.Topic)
			case req.ValidateOnly:
				err = cluster.ValidateTopicName(t.Topic)
				if err == nil {
					err = b.checkReplicationFactor(spec)
				}
				if err == nil {
					err = cluster.ValidateTopicConfigs(spec.Configs)
				}
				if err == nil {
					err = cluster.CheckMinInsyncReplicas(spec.Configs, b.requestedReplicationFactor(spec))
				}
				if _, exists := b.ctrl.Metadata().Topic(t.Topic); err == nil && exists {
					err = fmt.Errorf("%w: %s", cluster.ErrTopicExists, t.Topic)
				}
			default:
				err = b.createTopic(spec, requestTimeout(req.TimeoutMs))
			}
			resp.Topics = append(resp.Topics, errResult(t.Topic, err))
		}
		return resp
	})
}

func (b *Broker) handleDeleteTopics(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.DeleteTopicsRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	return b.async(c, h, func() wire.Encoder {
		resp := &wire.DeleteTopicsResponse{}
		for _, name := range req.Topics {
			var err error
			if cluster.IsInternalTopicName(name) {
				err = fmt.Errorf("%w: %q is internal", cluster.ErrInvalidTopic, name)
			} else {
				ctx, cancel := context.WithTimeout(b.ctx, requestTimeout(req.TimeoutMs))
				err = b.ctrl.DeleteTopic(ctx, name)
				if err == nil {
					err = b.reconcile(b.ctrl.Metadata()) // data removed before the answer
				}
				cancel()
			}
			resp.Topics = append(resp.Topics, errResult(name, err))
		}
		return resp
	})
}

func (b *Broker) handleDescribeConfigs(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.DescribeConfigsRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	md := b.ctrl.Metadata()
	resp := &wire.DescribeConfigsResponse{}
	for _, r := range req.Resources {
		res := wire.DescribeConfigsResult{ResourceType: r.ResourceType, ResourceName: r.ResourceName}
		t, ok := md.Topic(r.ResourceName)
		switch {
		case r.ResourceType == wire.ResourceBroker:
			res.Configs = brokerConfigEntries(md, r.ResourceName, r.ConfigNames)
		case r.ResourceType != wire.ResourceTopic:
			res.ErrorCode = wire.ErrInvalidRequest
		case !ok:
			res.ErrorCode = wire.ErrUnknownTopicOrPartition
		default:
			wanted := map[string]bool{}
			for _, n := range r.ConfigNames {
				wanted[n] = true
			}
			effective := b.effectiveConfigs(t)
			for _, def := range cluster.TopicConfigDefs() {
				if r.ConfigNames != nil && !wanted[def.Name] {
					continue
				}
				v, src := effective[def.Name], wire.ConfigSourceDefault
				if _, set := t.Configs[def.Name]; set {
					src = wire.ConfigSourceDynamicTopic
				} else if v != def.Default {
					src = wire.ConfigSourceStaticBroker
				}
				res.Configs = append(res.Configs, wire.DescribeConfigsEntry{Name: def.Name, Value: &v, Source: src})
			}
		}
		resp.Resources = append(resp.Resources, res)
	}
	return respond(c, h, resp)
}

// effectiveConfigs renders a topic's resolved configuration in Kafka's string forms.
func (b *Broker) effectiveConfigs(t cluster.TopicMeta) map[string]string {
	out := map[string]string{}
	for _, def := range cluster.TopicConfigDefs() {
		out[def.Name] = def.Default
	}
	// Forever is written as each key spells "never" in Kafka: retention.ms -1 (no limit),
	// flush.ms and segment.ms Long.MAX_VALUE (their rules refuse -1, so a described value
	// could not be set again).
	ms := func(d time.Duration, never string) string {
		if d == cluster.Forever {
			return never
		}
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
	const maxLong = "9223372036854775807"
	d := b.topicDefaults
	out["segment.bytes"] = strconv.FormatInt(d.SegmentBytes, 10)
	out["segment.ms"] = ms(d.SegmentTime, maxLong)
	out["segment.jitter.ms"] = ms(d.SegmentJitter, maxLong)
	out["retention.ms"] = ms(d.Retention, "-1")
	out["retention.bytes"] = strconv.FormatInt(d.RetentionBytes, 10)
	out["max.message.bytes"] = strconv.FormatInt(d.MaxMessageBytes, 10)
	out["index.interval.bytes"] = strconv.FormatInt(d.IndexIntervalBytes, 10)
	out["segment.index.bytes"] = strconv.FormatInt(d.SegmentIndexBytes, 10)
	out["flush.messages"] = strconv.FormatInt(d.FlushMessages, 10)
	out["flush.ms"] = ms(d.FlushInterval, maxLong)
	out["write.caching"] = strconv.FormatBool(d.WriteCaching)
	for k, v := range t.Configs {
		out[k] = v
	}
	return out
}

func (b *Broker) handleAlterConfigs(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.AlterConfigsRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	return b.async(c, h, func() wire.Encoder {
		resp := &wire.AlterConfigsResponse{}
		for _, r := range req.Resources {
			res := wire.AlterConfigsResult{ResourceType: r.ResourceType, ResourceName: r.ResourceName}
			var err error
			set := map[string]string{}
			for _, e := range r.Configs {
				if e.Value != nil {
					set[e.Name] = *e.Value
				}
			}
			if r.ResourceType == wire.ResourceBroker {
				err = b.alterBrokerConfigs(r.ResourceName, set, req.ValidateOnly)
				res.ErrorCode = errorCode(err)
				if err != nil {
					msg := err.Error()
					res.ErrorMessage = &msg
				}
				resp.Resources = append(resp.Resources, res)
				continue
			}
			if r.ResourceType != wire.ResourceTopic {
				res.ErrorCode = wire.ErrInvalidRequest
				resp.Resources = append(resp.Resources, res)
				continue
			}
			t, ok := b.ctrl.Metadata().Topic(r.ResourceName)
			switch {
			case !ok:
				err = fmt.Errorf("%w: %s", cluster.ErrUnknownTopic, r.ResourceName)
			case req.ValidateOnly:
				err = cluster.ValidateTopicConfigs(set)
				if err == nil {
					err = cluster.CheckMinInsyncReplicas(set, replicaCount(t))
				}
			default:
				var del []string
				for k := range t.Configs {
					if _, keep := set[k]; !keep {
						del = append(del, k)
					}
				}
				ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
				err = b.ctrl.AlterTopicConfigs(ctx, r.ResourceName, set, del)
				if err == nil {
					err = b.reconcile(b.ctrl.Metadata())
				}
				cancel()
			}
			res.ErrorCode = errorCode(err)
			if err != nil {
				msg := err.Error()
				res.ErrorMessage = &msg
			}
			resp.Resources = append(resp.Resources, res)
		}
		return resp
	})
}

func (b *Broker) handleListOffsets(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.ListOffsetsRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := &wire.ListOffsetsResponse{}
	for _, rt := range req.Topics {
		out := wire.ListOffsetsResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			res := wire.ListOffsetsResponsePartition{Partition: rp.Partition, Timestamp: -1, Offset: -1, LeaderEpoch: -1}
			p := b.partition(rt.Topic, rp.Partition)
			if p == nil || !p.servesAt(b.cfg.NodeID, rp.CurrentLeaderEpoch) {
				// The leader's log answers (a follower's is behind it), as in Kafka for a
				// consumer's ListOffsets.
				_, err := b.refuse(rt.Topic, rp.Partition, p, rp.CurrentLeaderEpoch)
				res.ErrorCode = errorCode(err)
				out.Partitions = append(out.Partitions, res)
				continue
			}
			switch rp.Timestamp {
			case wire.LatestTimestamp:
				res.Offset = int64(p.highWatermark())
			case wire.EarliestTimestamp:
				res.Offset = int64(p.log().StartOffset())
			default:
				ts := rp.Timestamp
				if ts == wire.MaxTimestamp {
					// The first record with the log's largest timestamp (none in an empty log).
					if ts = p.log().MaxTimestamp(); ts < 0 {
						break
					}
				}
				off, ts, ok, err := p.log().OffsetForTimestamp(ts)
				switch {
				case err != nil:
					res.ErrorCode = errorCode(err)
				case ok && off < p.highWatermark(): // a record above it is not committed: none yet
					res.Offset, res.Timestamp = int64(off), ts
				}
			}
			out.Partitions = append(out.Partitions, res)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return respond(c, h, resp)
}

// Dynamic broker configs (the replication throttles, throttle.go): resource name "" is the
// cluster-wide default, "N" broker N. AlterConfigs replaces the resource's whole set, as for a
// topic.

// brokerConfigEntries describes broker's dynamic configs (names: only those; nil: all set).
func brokerConfigEntries(md *cluster.Metadata, broker string, names []string) []wire.DescribeConfigsEntry {
	src := wire.ConfigSourceDynamicBroker
	if broker == "" {
		src = wire.ConfigSourceDynamicDefaultBroker
	}
	cfgs := md.BrokerConfigs(broker)
	keys := make([]string, 0, len(cfgs))
	for k := range cfgs {
		if names == nil || slices.Contains(names, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]wire.DescribeConfigsEntry, 0, len(keys))
	for _, k := range keys {
		v := cfgs[k]
		out = append(out, wire.DescribeConfigsEntry{Name: k, Value: &v, Source: src})
	}
	return out
}

// alterBrokerConfigs makes set broker's whole set of dynamic configs.
func (b *Broker) alterBrokerConfigs(broker string, set map[string]string, validateOnly bool) error {
	for k, v := range set {
		if err := cluster.ValidateBrokerConfig(k, v); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	var del []string
	for k := range b.ctrl.Metadata().BrokerConfigs(broker) {
		if _, keep := set[k]; !keep {
			del = append(del, k)
		}
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := b.ctrl.AlterBrokerConfigs(ctx, broker, set, del); err != nil {
		return err
	}
	return b.reconcile(b.ctrl.Metadata())
}
