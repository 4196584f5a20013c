package broker

// Behavior: OffsetCommit, OffsetFetch, ListGroups.
//
// Committed offsets are records in the internal topic __consumer_offsets, in the group's partition
// abs(javaHashCode(group.id)) % offsets.topic.num.partitions (internal/coordinator: Kafka's
// rule, which the client routes by too), so they are as durable as any log: a commit is
// answered once its record is fsynced. The group's coordinator is the leader of that partition:
// OffsetCommit and OffsetFetch for a group another broker coordinates answer NOT_COORDINATOR,
// for one whose partition has no leader (or whose log here is not open) COORDINATOR_NOT_AVAILABLE,
// and ListGroups lists the groups this broker coordinates. At start every partition of the topic
// hosted here is replayed into memory; OffsetFetch answers from memory.
//
// Before the coordinator rule was Kafka's, a group's records went to the partition of an FNV-1a
// hash of its id: a data directory of then holds a group's older records in that partition and
// its newer ones in the group's partition by the current rule. Replay therefore lets a record of
// the group's own partition win over any record of another partition, whatever the order the
// partitions are read in (replayTomb). The topic has no compaction yet, so
// it keeps every commit: retention never applies to it (whatever log.retention.bytes or the
// topic's configs say); replay cost grows with the number of commits.
//
// Record format (version 0, big-endian), the key and value of one record:
//
//	key:   version i16 = 0 | group string(i16 len) | topic string(i16 len) | partition i32
//	value: version i16 = 0 | offset i64 | leader epoch i32 | commit time ms i64 |
//	       metadata nullable string(i16 len, -1 = null)
//
// A record with a null value deletes the committed offset. When a topic is deleted (or replaced
// by a new topic of the same name), as the metadata says, every group's committed offset for it
// is deleted so, as in Kafka: a group must not resume a re-created topic at the old topic's
// position. Every broker deletes them from memory; the leader of each offsets partition writes
// the deletions. Commit appends and those deletions are serialised (writeMu), so a commit of the
// old topic is never written after its deletion.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/sluicemq/sluice/segment"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/internal/coordinator"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
)

// OffsetsTopic is the internal topic of committed offsets.
const OffsetsTopic = "__consumer_offsets"

type committed struct {
	offset      int64
	leaderEpoch int32
	// home: the record came from the group's own partition (by the current rule), which a
	// replayed record of another partition does not override.
	home     bool
	metadata *string
}

type groupPartition struct {
	group string
	tp    topicPartition
}

// offsetStore holds committed offsets in memory, backed by OffsetsTopic.
//
// Ownership: mu guards offsets; writeMu guards topics.
type offsetStore struct {
	b          *Broker
	partitions int32
	// writeMu serialises appends to OffsetsTopic: a commit (checked against the metadata
	// after it is taken) and the tombstones of a deleted topic's offsets.
	writeMu sync.Mutex
	// topics are the topics' ids as the metadata last reconciled says: a name gone, or with
	// another id, is a deleted topic whose offsets go (reconcileTopics).
	topics  map[string]cluster.TopicID
	mu      sync.RWMutex
	offsets map[groupPartition]committed
}

// openOffsetStore creates OffsetsTopic on first start and replays it.
func (b *Broker) openOffsetStore() (*offsetStore, error) {
	t, ok := b.ctrl.Metadata().Topic(OffsetsTopic)
	if !ok {
		spec := cluster.TopicSpec{
			Name: OffsetsTopic, NumPartitions: int32(b.cfg.OffsetsTopicPartitions), ReplicationFactor: -1,
			Configs:  map[string]string{"retention.ms": "-1", "segment.bytes": strconv100MiB},
			Internal: true,
		}
		if err := b.createTopic(spec, 30*time.Second); err != nil && !errors.Is(err, cluster.ErrTopicExists) {
			return nil, fmt.Errorf("create %s: %w", OffsetsTopic, err)
		}
		t, _ = b.ctrl.Metadata().Topic(OffsetsTopic)
	}
	s := &offsetStore{b: b, partitions: int32(len(t.Partitions)), offsets: map[groupPartition]committed{}}
	tomb := map[groupPartition]struct{}{}
	for _, pm := range t.Partitions {
		if err := s.replay(pm.Partition, tomb); err != nil {
			return nil, err
		}
	}
	// Offsets of partitions deleted while their tombstones were not yet durable (a crash
	// right after a topic deletion) go now, before a topic of the same name can be created.
	md := b.ctrl.Metadata()
	s.topics = topicIDs(md)
	s.forget(func(tp topicPartition) bool {
		t, ok := md.Topic(tp.topic)
		if !ok {
			return true
		}
		_, ok = t.Partition(tp.partition)
		return !ok
	})
	return s, nil
}

// topicIDs is every topic's id in md.
func topicIDs(md *cluster.Metadata) map[string]cluster.TopicID {
	ids := make(map[string]cluster.TopicID, md.NumTopics())
	for _, t := range md.Topics() {
		ids[t.Name] = t.ID
	}
	return ids
}

// reconcileTopics forgets the offsets of the topics md no longer has (or has under another id:
// deleted and created again) since the last call. The reconciler calls it with each metadata
// it applies.
func (s *offsetStore) reconcileTopics(md *cluster.Metadata) {
	s.writeMu.Lock()
	var gone map[string]bool
	for name, id := range s.topics {
		if t, ok := md.Topic(name); !ok || t.ID != id {
			if gone == nil {
				gone = map[string]bool{}
			}
			gone[name] = true
		}
	}
	s.topics = topicIDs(md)
	s.writeMu.Unlock()
	if gone != nil {
		s.forget(func(tp topicPartition) bool { return gone[tp.topic] })
	}
}

// forget deletes every group's committed offset for the partitions gone reports, in memory
// and, in the offsets partitions this broker leads, with tombstones in OffsetsTopic, so that a
// restart does not bring them back (the other partitions' leaders write theirs).
func (s *offsetStore) forget(gone func(topicPartition) bool) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	byPartition := map[int32][]groupPartition{}
	for gp := range s.offsets {
		if gone(gp.tp) {
			delete(s.offsets, gp)
			part := s.partitionFor(gp.group)
			byPartition[part] = append(byPartition[part], gp)
		}
	}
	s.mu.Unlock()
	now := time.Now().UnixMilli()
	for part, gps := range byPartition {
		p := s.b.partition(OffsetsTopic, part)
		if p == nil || !p.servesAt(s.b.cfg.NodeID, -1) {
			continue
		}
		builder := batch.NewBuilder(batch.DefaultBuilderOptions())
		for _, gp := range gps {
			builder.Append(&batch.Record{Timestamp: now, Key: encodeOffsetKey(gp)}) // null value: deleted
		}
		bt, err := builder.Build()
		if err == nil {
			_, err = p.log().Append(bt, p.leaderEpoch())
		}
		if err != nil {
			s.b.logger.Error("deleting committed offsets of a deleted partition", "partition", p.tp.String(), "err", err)
		}
	}
}

const strconv100MiB = "104857600"

// partitionFor is group's partition of OffsetsTopic, led by its coordinator.
func (s *offsetStore) partitionFor(group string) int32 {
	return coordinator.Partition(group, s.partitions)
}

// replay loads one partition of OffsetsTopic into memory. tomb is shared by the replay of every
// partition: the group-partitions whose latest record in their own partition is a deletion.
func (s *offsetStore) replay(partition int32, tomb map[groupPartition]struct{}) error {
	p := s.b.partition(OffsetsTopic, partition)
	if p == nil {
		return nil // not hosted here
	}
	var buf []byte
	// Up to the high watermark: a record above it is not committed (a new leader may truncate
	// it away), so no commit acknowledged to a client is in it.
	end := p.highWatermarkBound()
	for off := p.log().StartOffset(); off < end; {
		sl, err := p.log().Read(off, 1<<20, end)
		if err != nil {
			return fmt.Errorf("replay %s-%d: %w", OffsetsTopic, partition, err)
		}
		buf, err = sl.AppendTo(buf[:0])
		sl.Release()
		if errors.Is(err, segment.ErrTruncated) {
			end = min(end, p.highWatermarkBound())
			continue // a truncation cut the segment under the read: read again what is left
		}
		if err != nil {
			return err
		}
		progressed := false
		for rest := buf; len(rest) > 0; {
			bt, r, err := batch.Next(rest)
			if err != nil {
				break // partial batch at the end of the read
			}
			it := bt.Iter(batch.IterOptions{})
			var rec batch.Record
			for it.Next(&rec) {
				s.applyAt(rec.Key, rec.Value, partition, tomb)
			}
			if err := it.Err(); err != nil {
				return fmt.Errorf("replay %s-%d at %d: %w", OffsetsTopic, partition, bt.BaseOffset(), err)
			}
			off, progressed = bt.NextOffset(), true
			rest = r
		}
		if !progressed {
			return fmt.Errorf("replay %s-%d: no whole batch at offset %d", OffsetsTopic, partition, off)
		}
	}
	return nil
}

// apply installs one offsets record of the group's own partition; malformed records are
// skipped (a newer version we do not know, for example), never fatal.
func (s *offsetStore) apply(key, value []byte) { s.applyAt(key, value, -1, nil) }

// applyAt installs one offsets record replayed from partition part of OffsetsTopic (-1: the
// group's own). A record of the group's own partition replaces what is there; one of another
// partition (written under the earlier coordinator rule, so older than any of the group's own)
// only fills in what the group's own partition has not said, tomb recording its deletions.
func (s *offsetStore) applyAt(key, value []byte, part int32, tomb map[groupPartition]struct{}) {
	gp, ok := decodeOffsetKey(key)
	if !ok {
		return
	}
	home := part < 0 || part == s.partitionFor(gp.group)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !home {
		if _, deleted := tomb[gp]; deleted || s.offsets[gp].home {
			return
		}
	}
	if value == nil {
		delete(s.offsets, gp)
		if home && tomb != nil {
			tomb[gp] = struct{}{}
		}
		return
	}
	if c, ok := decodeOffsetValue(value); ok {
		c.home = home
		s.offsets[gp] = c
		if home {
			delete(tomb, gp)
		}
	}
}

func appendString16(dst []byte, v string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(v)))
	return append(dst, v...)
}

func encodeOffsetKey(gp groupPartition) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = appendString16(b, gp.group)
	b = appendString16(b, gp.tp.topic)
	return binary.BigEndian.AppendUint32(b, uint32(gp.tp.partition))
}

func encodeOffsetValue(c committed, now int64) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(c.offset))
	b = binary.BigEndian.AppendUint32(b, uint32(c.leaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(now))
	if c.metadata == nil {
		return binary.BigEndian.AppendUint16(b, math.MaxUint16) // -1
	}
	return appendString16(b, *c.metadata)
}

func readString16(b []byte) (string, []byte, bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if n == math.MaxUint16 || len(b) < 2+n {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

func decodeOffsetKey(b []byte) (groupPartition, bool) {
	if len(b) < 2 || binary.BigEndian.Uint16(b) != 0 {
		return groupPartition{}, false
	}
	group, rest, ok := readString16(b[2:])
	if !ok {
		return groupPartition{}, false
	}
	topic, rest, ok := readString16(rest)
	if !ok || len(rest) != 4 {
		return groupPartition{}, false
	}
	return groupPartition{group, topicPartition{topic, int32(binary.BigEndian.Uint32(rest))}}, true
}

func decodeOffsetValue(b []byte) (committed, bool) {
	if len(b) < 2+8+4+8+2 || binary.BigEndian.Uint16(b) != 0 {
		return committed{}, false
	}
	c := committed{offset: int64(binary.BigEndian.Uint64(b[2:])), leaderEpoch: int32(binary.BigEndian.Uint32(b[10:]))}
	rest := b[22:]
	if binary.BigEndian.Uint16(rest) == math.MaxUint16 {
		return c, len(rest) == 2
	}
	md, rest, ok := readString16(rest)
	if !ok || len(rest) != 0 {
		return committed{}, false
	}
	c.metadata = &md
	return c, true
}

// coordinatorFor is group's partition of OffsetsTopic if this broker coordinates the group (it
// leads that partition), or the refusal: ErrNotCoordinator when another broker leads it,
// ErrCoordinatorNotAvailable when none does or its log here is not open.
func (b *Broker) coordinatorFor(group string) (*partition, error) {
	part := b.offsets.partitionFor(group)
	p := b.partition(OffsetsTopic, part)
	if p != nil && p.servesAt(b.cfg.NodeID, -1) {
		return p, nil
	}
	_, err := b.refuse(OffsetsTopic, part, p, -1)
	if errors.Is(err, ErrNotLeaderOrFollower) {
		return nil, fmt.Errorf("%w: group %q (%v)", ErrNotCoordinator, group, err)
	}
	return nil, fmt.Errorf("%w: group %q (%v)", ErrCoordinatorNotAvailable, group, err)
}

// coordinates reports whether this broker coordinates group (ListGroups).
func (b *Broker) coordinates(group string) bool {
	p := b.partition(OffsetsTopic, b.offsets.partitionFor(group))
	return p != nil && p.servesAt(b.cfg.NodeID, -1)
}

// offsetMetadataMaxBytes is Kafka's offset.metadata.max.bytes.
const offsetMetadataMaxBytes = 4096

func (b *Broker) handleOffsetCommit(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.OffsetCommitRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := &wire.OffsetCommitResponse{}
	s := b.offsets
	// Held from the partitions' check to the append: a partition deleted meanwhile has its
	// offsets' tombstones written after this commit, never before it.
	s.writeMu.Lock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			s.writeMu.Unlock()
		}
	}
	defer unlock()
	// The coordinator's partition, and the metadata the commit is checked against, are read
	// with writeMu held: a topic deleted before is seen deleted (its offsets forgotten, under
	// writeMu, before this), one deleted after has its offsets' tombstones written after this.
	var p *partition
	var coordErr error
	if req.GroupID != "" {
		p, coordErr = b.coordinatorFor(req.GroupID)
	}
	md := b.ctrl.Metadata()
	builder := batch.NewBuilder(batch.DefaultBuilderOptions())
	now := time.Now().UnixMilli()
	var pending []groupPartition
	var values []committed
	var topicIDs []cluster.TopicID
	results := make([][]wire.PartitionResult, len(req.Topics))
	for i, t := range req.Topics {
		mt, topicOK := md.Topic(t.Topic)
		// And as the store last reconciled it: a topic re-created since is not committed to
		// until its predecessor's offsets are forgotten (moments later), or they would take
		// this commit with them.
		topicOK = topicOK && s.topics[t.Topic] == mt.ID
		for _, rp := range t.Partitions {
			res := wire.PartitionResult{Partition: rp.Partition}
			_, partOK := mt.Partition(rp.Partition)
			switch {
			case req.GroupID == "":
				res.ErrorCode = wire.ErrInvalidGroupID
			case coordErr != nil:
				res.ErrorCode = errorCode(coordErr)
			case rp.Metadata != nil && len(*rp.Metadata) > offsetMetadataMaxBytes:
				res.ErrorCode = wire.ErrOffsetMetadataTooLarge
			case !topicOK || !partOK:
				res.ErrorCode = wire.ErrUnknownTopicOrPartition
			default:
				gp := groupPartition{req.GroupID, topicPartition{t.Topic, rp.Partition}}
				cm := committed{offset: rp.Offset, leaderEpoch: rp.LeaderEpoch, home: true, metadata: rp.Metadata}
				builder.Append(&batch.Record{Timestamp: now, Key: encodeOffsetKey(gp), Value: encodeOffsetValue(cm, now)})
				pending = append(pending, gp)
				values = append(values, cm)
				topicIDs = append(topicIDs, mt.ID)
			}
			results[i] = append(results[i], res)
		}
		resp.Topics = append(resp.Topics, wire.OffsetCommitResponseTopic{Topic: t.Topic})
	}
	finish := func(code wire.ErrorCode) {
		for i := range results {
			for j := range results[i] {
				if results[i][j].ErrorCode == wire.NoError {
					results[i][j].ErrorCode = code
				}
			}
			resp.Topics[i].Partitions = results[i]
		}
	}
	if len(pending) == 0 {
		finish(wire.NoError)
		return respond(c, h, resp)
	}
	bt, err := builder.Build()
	var info appendInfo
	l := p.log() // the wait below is on the log that took the append (heal.go may swap it)
	if err == nil {
		info, err = l.Append(bt, p.leaderEpoch())
	}
	unlock()
	if err != nil {
		b.logger.Error("writing offset commit", "group", req.GroupID, "err", err)
		finish(errorCode(err))
		return respond(c, h, resp)
	}
	pend := c.NewPending()
	l.OnSynced(info.LastOffset, func(err error) {
		if err == nil {
			s.mu.Lock()
			for i, gp := range pending {
				// A topic deleted since the append has had its offsets forgotten: the commit
				// must not bring one back (nor apply it to a new topic of that name).
				if t, ok := b.ctrl.Metadata().Topic(gp.tp.topic); ok && t.ID == topicIDs[i] {
					s.offsets[gp] = values[i]
				}
			}
			s.mu.Unlock()
		}
		finish(errorCode(err))
		complete(pend, h, resp)
	})
	return pend
}

// handleListGroups answers ListGroups: every group with a committed offset that this broker
// coordinates, sorted by id (a client lists every broker's, as Kafka's does).
func (b *Broker) handleListGroups(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.ListGroupsRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	s := b.offsets
	seen := map[string]bool{}
	s.mu.RLock()
	for gp := range s.offsets {
		seen[gp.group] = true
	}
	s.mu.RUnlock()
	for id := range seen {
		if !b.coordinates(id) {
			delete(seen, id)
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	resp := &wire.ListGroupsResponse{Groups: make([]wire.ListedGroup, len(ids))}
	for i, id := range ids {
		resp.Groups[i].GroupID = id
	}
	return respond(c, h, resp)
}

func (b *Broker) handleOffsetFetch(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.OffsetFetchRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	s := b.offsets
	resp := &wire.OffsetFetchResponse{}
	if _, err := b.coordinatorFor(req.GroupID); err != nil {
		resp.ErrorCode = errorCode(err)
		for _, t := range req.Topics {
			out := wire.OffsetFetchResponseTopic{Topic: t.Topic}
			for _, part := range t.Partitions {
				out.Partitions = append(out.Partitions, wire.OffsetFetchResponsePartition{Partition: part, Offset: -1, LeaderEpoch: -1, ErrorCode: resp.ErrorCode})
			}
			resp.Topics = append(resp.Topics, out)
		}
		return respond(c, h, resp)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if req.Topics == nil {
		byTopic := map[string]*wire.OffsetFetchResponseTopic{}
		var order []string
		for gp, cm := range s.offsets {
			if gp.group != req.GroupID {
				continue
			}
			t := byTopic[gp.tp.topic]
			if t == nil {
				t = &wire.OffsetFetchResponseTopic{Topic: gp.tp.topic}
				byTopic[gp.tp.topic] = t
				order = append(order, gp.tp.topic)
			}
			t.Partitions = append(t.Partitions, wire.OffsetFetchResponsePartition{
				Partition: gp.tp.partition, Offset: cm.offset, LeaderEpoch: cm.leaderEpoch, Metadata: cm.metadata,
			})
		}
		sort.Strings(order)
		for _, name := range order {
			t := byTopic[name]
			sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
			resp.Topics = append(resp.Topics, *t)
		}
		return respond(c, h, resp)
	}
	for _, t := range req.Topics {
		out := wire.OffsetFetchResponseTopic{Topic: t.Topic}
		for _, part := range t.Partitions {
			res := wire.OffsetFetchResponsePartition{Partition: part, Offset: -1, LeaderEpoch: -1}
			if cm, ok := s.offsets[groupPartition{req.GroupID, topicPartition{t.Topic, part}}]; ok {
				res.Offset, res.LeaderEpoch, res.Metadata = cm.offset, cm.leaderEpoch, cm.metadata
			}
			out.Partitions = append(out.Partitions, res)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return respond(c, h, resp)
}
