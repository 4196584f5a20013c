package broker

// Behavior: OffsetCommit, OffsetFetch, ListGroups.
//
// Committed offsets are records in the group's partition of __consumer_offsets, written and
// served by the group's coordinator, the partition's leader (groupcoord.go): a commit is
// answered once its record is committed (the high watermark has passed it), and OffsetFetch
// answers from the coordinator's memory. Any other broker answers both NOT_COORDINATOR (or
// COORDINATOR_LOAD_IN_PROGRESS while it replays the partition, COORDINATOR_NOT_AVAILABLE when
// the partition has no leader), before it looks at anything else.
//
// A commit from a member of a group that uses the coordinator's membership is fenced by the
// group's generation and member id (group.Group.CheckCommit: ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS); a simple commit (generation
// -1, no member id) is taken only while the group has no members.
//
// Record format (version 0, big-endian), the key and value of one record:
//
//	key:   version i16 = 0 | group string(i16 len) | topic string(i16 len) | partition i32
//	value: version i16 = 0 | offset i64 | leader epoch i32 | commit time ms i64 |
//	       metadata nullable string(i16 len, -1 = null)
//
// A record with a null value deletes the committed offset. Group snapshots share the
// partition under key version 2 (package group). When a topic is deleted (or replaced by a new
// topic of the same name), as the metadata says, every group's committed offset for it is
// deleted so, as in Kafka: a group must not resume a re-created topic at the old topic's
// position. The topic has no compaction yet, so it keeps every record: retention never applies
// to it, and a coordinator's load time grows with the number of commits.

import (
	"encoding/binary"
	"math"
	"sort"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
)

type groupPartition struct {
	group string
	tp    topicPartition
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

// offsetMetadataMaxBytes is Kafka's offset.metadata.max.bytes.
const offsetMetadataMaxBytes = 4096

func (b *Broker) handleOffsetCommit(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	req := wire.OffsetCommitRequest{Version: h.APIVersion}
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := &wire.OffsetCommitResponse{Topics: make([]wire.OffsetCommitResponseTopic, len(req.Topics))}
	for i, t := range req.Topics {
		resp.Topics[i].Topic = t.Topic
		resp.Topics[i].Partitions = make([]wire.PartitionResult, len(t.Partitions))
		for j, rp := range t.Partitions {
			resp.Topics[i].Partitions[j].Partition = rp.Partition
		}
	}
	// fill sets code on every partition not answered otherwise yet.
	fill := func(code wire.ErrorCode) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == wire.NoError {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
	}
	if req.GroupID == "" {
		fill(wire.ErrInvalidGroupID)
		return respond(c, h, resp)
	}
	gc := b.groups
	sh, err := gc.shardFor(req.GroupID)
	if err != nil {
		fill(errorCode(err))
		return respond(c, h, resp)
	}
	// writeMu from the check against the metadata to the append: a partition deleted meanwhile
	// has its offsets' tombstones written after this commit, never before it.
	gc.writeMu.Lock()
	if !sh.lock() {
		gc.writeMu.Unlock()
		fill(wire.ErrNotCoordinator)
		return respond(c, h, resp)
	}
	unlock := func() {
		sh.mu.Unlock()
		gc.writeMu.Unlock()
	}
	e := sh.entry(req.GroupID, false)
	var code wire.ErrorCode
	switch {
	case e != nil:
		code = e.g.CheckCommit(req.MemberID, commitInstanceID(&req), req.GenerationID)
	case req.GenerationID >= 0:
		code = wire.ErrIllegalGeneration // no such group: a member of it cannot be current (Kafka)
	}
	if code != wire.NoError {
		unlock()
		fill(code)
		return respond(c, h, resp)
	}
	md := b.ctrl.Metadata()
	now := time.Now().UnixMilli()
	var recs []*batch.Record
	type pendingCommit struct {
		tp      topicPartition
		value   committed
		topicID cluster.TopicID
	}
	var pending []pendingCommit
	for i, t := range req.Topics {
		mt, topicOK := md.Topic(t.Topic)
		// And as the coordinator last reconciled it: a topic re-created since is not committed
		// to until its predecessor's offsets are forgotten (moments later), or they would take
		// this commit with them.
		topicOK = topicOK && gc.topics[t.Topic] == mt.ID
		for j, rp := range t.Partitions {
			res := &resp.Topics[i].Partitions[j]
			_, partOK := mt.Partition(rp.Partition)
			switch {
			case rp.Metadata != nil && len(*rp.Metadata) > offsetMetadataMaxBytes:
				res.ErrorCode = wire.ErrOffsetMetadataTooLarge
			case !topicOK || !partOK:
				res.ErrorCode = wire.ErrUnknownTopicOrPartition
			default:
				tp := topicPartition{t.Topic, rp.Partition}
				cm := committed{offset: rp.Offset, leaderEpoch: rp.LeaderEpoch, metadata: rp.Metadata}
				recs = append(recs, &batch.Record{Timestamp: now, Key: encodeOffsetKey(groupPartition{req.GroupID, tp}), Value: encodeOffsetValue(cm, now)})
				pending = append(pending, pendingCommit{tp, cm, mt.ID})
			}
		}
	}
	if len(recs) == 0 {
		unlock()
		return respond(c, h, resp)
	}
	if e == nil {
		e = sh.entry(req.GroupID, true) // a simple commit creates its group, as Kafka's
	}
	pend := c.NewPending()
	b.appendAcksAll(sh.p, sh.epoch, recs, b.cfg.OffsetsCommitTimeout, func(err error) {
		if err == nil {
			if sh.lock() {
				if sh.groups[req.GroupID] == e {
					cur := b.ctrl.Metadata()
					for _, pc := range pending {
						// A topic deleted since the append has had its offsets forgotten: the
						// commit must not bring one back (nor apply to a new topic of that name).
						if t, ok := cur.Topic(pc.tp.topic); ok && t.ID == pc.topicID {
							e.offsets[pc.tp] = pc.value
						}
					}
				}
				sh.mu.Unlock()
			} else {
				err = ErrNotCoordinator
			}
		}
		fill(errorCode(err))
		complete(pend, h, resp)
	})
	unlock()
	return pend
}

// commitInstanceID is the commit's group.instance.id, "" for none.
func commitInstanceID(req *wire.OffsetCommitRequest) string { return orEmpty(req.GroupInstanceID) }

func (b *Broker) handleOffsetFetch(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.OffsetFetchRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := &wire.OffsetFetchResponse{}
	refuse := func(code wire.ErrorCode) *server.Pending {
		resp.ErrorCode = code
		for _, t := range req.Topics {
			out := wire.OffsetFetchResponseTopic{Topic: t.Topic}
			for _, part := range t.Partitions {
				out.Partitions = append(out.Partitions, wire.OffsetFetchResponsePartition{Partition: part, Offset: -1, LeaderEpoch: -1, ErrorCode: code})
			}
			resp.Topics = append(resp.Topics, out)
		}
		return respond(c, h, resp)
	}
	if req.GroupID == "" {
		return refuse(wire.ErrInvalidGroupID)
	}
	sh, err := b.groups.shardFor(req.GroupID)
	if err != nil {
		return refuse(errorCode(err))
	}
	if !sh.lock() {
		return refuse(wire.ErrNotCoordinator)
	}
	defer sh.mu.Unlock()
	var offsets map[topicPartition]committed
	if e := sh.entry(req.GroupID, false); e != nil {
		offsets = e.offsets
	}
	if req.Topics == nil {
		byTopic := map[string]*wire.OffsetFetchResponseTopic{}
		var order []string
		for tp, cm := range offsets {
			t := byTopic[tp.topic]
			if t == nil {
				t = &wire.OffsetFetchResponseTopic{Topic: tp.topic}
				byTopic[tp.topic] = t
				order = append(order, tp.topic)
			}
			t.Partitions = append(t.Partitions, wire.OffsetFetchResponsePartition{
				Partition: tp.partition, Offset: cm.offset, LeaderEpoch: cm.leaderEpoch, Metadata: cm.metadata,
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
			if cm, ok := offsets[topicPartition{t.Topic, part}]; ok {
				res.Offset, res.LeaderEpoch, res.Metadata = cm.offset, cm.leaderEpoch, cm.metadata
			}
			out.Partitions = append(out.Partitions, res)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return respond(c, h, resp)
}
