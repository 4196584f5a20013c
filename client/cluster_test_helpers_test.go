package client

// A fake cluster of brokers in one process, speaking the wire protocol over loopback: enough
// of Metadata, Produce, Fetch, ListOffsets and the offsets apis for the client's routing
// (bootstrap, leader hints, leadership moves, the group coordinator) to be tested against
// brokers whose leadership the test moves at will. Every broker answers from one shared state,
// as brokers following one controller would (with no lag: a test that wants a broker with a
// stale view sets it per broker).

import (
	"bufio"
	"errors"
	"github.com/sluicemq/sluice/internal/coordinator"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
)

// testCluster is the shared state of the fake brokers. mu guards everything but the brokers'
// listeners.
type testCluster struct {
	t       *testing.T
	brokers []*clusterBroker

	mu      sync.Mutex
	topics  map[string][]*clusterPartition
	commits map[string]map[TopicPartition]int64 // by group
	// produced counts produce requests per broker id, answered or refused.
	produced map[int32]int
	// fetched counts fetch requests per broker id that it served records for.
	fetched map[int32]int
	// leaderFetches counts fetch requests per broker id that it served as the leader, with
	// records or at the log end.
	leaderFetches map[int32]int
	// described counts DescribeReplicas requests per broker id.
	described map[int32]int
	// frozen, if set, is the leadership Metadata answers with (freezeMetadata).
	frozen map[string][]clusterPartition
}

type clusterPartition struct {
	leader, epoch int32
	log           [][]byte // batches, base offsets stamped
	next          int64
}

type clusterBroker struct {
	c    *testCluster
	id   int32
	ln   net.Listener
	host string
	port int32

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// newTestCluster starts n brokers (ids 0..n-1) on loopback ports; the test's cleanup stops
// them and waits for their goroutines.
func newTestCluster(t *testing.T, n int) *testCluster {
	c := &testCluster{t: t, topics: map[string][]*clusterPartition{}, commits: map[string]map[TopicPartition]int64{}, produced: map[int32]int{}, fetched: map[int32]int{}, leaderFetches: map[int32]int{}, described: map[int32]int{}}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := ln.Addr().(*net.TCPAddr)
		b := &clusterBroker{c: c, id: int32(i), ln: ln, host: a.IP.String(), port: int32(a.Port), conns: map[net.Conn]struct{}{}}
		c.brokers = append(c.brokers, b)
		b.wg.Add(1)
		go b.accept()
	}
	t.Cleanup(func() {
		for _, b := range c.brokers {
			b.stop()
		}
	})
	return c
}

func (b *clusterBroker) addr() string { return b.host + ":" + strconv.Itoa(int(b.port)) }

// stop closes the listener and every connection, and waits for the broker's goroutines.
func (b *clusterBroker) stop() {
	_ = b.ln.Close()
	b.mu.Lock()
	for nc := range b.conns {
		_ = nc.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// addTopic creates topic with one partition per leader given, at epoch 0.
func (c *testCluster) addTopic(topic string, leaders ...int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range leaders {
		c.topics[topic] = append(c.topics[topic], &clusterPartition{leader: l})
	}
}

// moveLeader makes broker to the leader of topic's partition, one epoch on.
func (c *testCluster) moveLeader(topic string, partition int32, to int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.topics[topic][partition]
	p.leader, p.epoch = to, p.epoch+1
}

func (b *clusterBroker) accept() {
	defer b.wg.Done()
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns[nc] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(nc)
	}
}

// serve answers one connection's requests in order.
func (b *clusterBroker) serve(nc net.Conn) {
	defer b.wg.Done()
	defer func() {
		_ = nc.Close()
		b.mu.Lock()
		delete(b.conns, nc)
		b.mu.Unlock()
	}()
	r := bufio.NewReader(nc)
	for {
		h, req, err := readFakeRequest(r)
		if err != nil {
			return
		}
		resp := b.handle(req, h.APIVersion)
		if resp == nil {
			continue // acks=0
		}
		if _, err := nc.Write(wire.AppendResponseFrame(nil, h.CorrelationID, resp)); err != nil {
			return
		}
	}
}

func (b *clusterBroker) handle(req wire.Request, v int16) wire.Encoder {
	c := b.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r := req.(type) {
	case *wire.APIVersionsRequest:
		return &wire.APIVersionsResponse{APIKeys: wire.SupportedAPIs()}
	case *wire.MetadataRequest:
		resp := &wire.MetadataResponse{Version: v, ControllerID: 0}
		for _, ob := range c.brokers {
			resp.Brokers = append(resp.Brokers, wire.MetadataBroker{NodeID: ob.id, Host: ob.host, Port: ob.port})
		}
		for name, ps := range c.topics {
			t := wire.MetadataTopic{Topic: name, IsInternal: name == offsetsTopic}
			if f := c.frozen[name]; f != nil {
				ps = nil
				for i := range f {
					ps = append(ps, &f[i])
				}
			}
			for i, p := range ps {
				t.Partitions = append(t.Partitions, wire.MetadataPartition{Partition: int32(i), Leader: p.leader, LeaderEpoch: p.epoch, Replicas: []int32{p.leader}, ISR: []int32{p.leader}})
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	case *wire.InitProducerIDRequest:
		return &wire.InitProducerIDResponse{ProducerID: fakeProducerIDs.Add(1)}
	case *wire.DescribeReplicasRequest:
		c.described[b.id]++
		resp := &wire.DescribeReplicasResponse{Version: r.Version}
		for _, name := range r.Topics {
			out := wire.DescribeReplicasTopic{Topic: name}
			for i, p := range c.topics[name] {
				dp := wire.DescribeReplicasPartition{Partition: int32(i), Leader: p.leader, LeaderEpoch: p.epoch, HighWatermark: p.next, LogEndOffset: p.next,
					ISR: []int32{p.leader}, Replicas: []wire.DescribeReplicasReplica{{ReplicaID: p.leader, LogEndOffset: p.next, InISR: true}}}
				if p.leader != b.id {
					dp = wire.DescribeReplicasPartition{Partition: int32(i), ErrorCode: wire.ErrNotLeaderOrFollower, Leader: p.leader}
				}
				out.Partitions = append(out.Partitions, dp)
			}
			resp.Topics = append(resp.Topics, out)
		}
		return resp
	case *wire.ProduceRequest:
		c.produced[b.id]++
		resp := &wire.ProduceResponse{Version: v}
		for _, rt := range r.Topics {
			out := wire.ProduceResponseTopic{Topic: rt.Topic}
			for _, rp := range rt.Partitions {
				res := wire.ProduceResponsePartition{Partition: rp.Partition, BaseOffset: -1, LogAppendTimeMs: -1, CurrentLeader: wire.NoLeaderHint}
				p := c.partition(rt.Topic, rp.Partition)
				switch {
				case p == nil:
					res.ErrorCode = wire.ErrUnknownTopicOrPartition
				case p.leader != b.id:
					res.ErrorCode = wire.ErrNotLeaderOrFollower
					res.CurrentLeader = c.hint(p, resp.Version, &resp.NodeEndpoints)
				default:
					res.BaseOffset = p.append(rp.Records)
				}
				out.Partitions = append(out.Partitions, res)
			}
			resp.Topics = append(resp.Topics, out)
		}
		if r.Acks == wire.AcksNone {
			return nil
		}
		return resp
	case *wire.FetchRequest:
		resp := &wire.FetchResponse{Version: v}
		for _, rt := range r.Topics {
			out := wire.FetchResponseTopic{Topic: rt.Topic}
			for _, rp := range rt.Partitions {
				res := wire.FetchResponsePartition{Partition: rp.Partition, CurrentLeader: wire.NoLeaderHint}
				p := c.partition(rt.Topic, rp.Partition)
				switch {
				case p == nil:
					res.ErrorCode = wire.ErrUnknownTopicOrPartition
				case p.leader != b.id:
					res.ErrorCode = wire.ErrNotLeaderOrFollower
					res.CurrentLeader = c.hint(p, resp.Version, &resp.NodeEndpoints)
				case rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < p.epoch:
					res.ErrorCode = wire.ErrFencedLeaderEpoch
					res.CurrentLeader = c.hint(p, resp.Version, &resp.NodeEndpoints)
				default:
					c.leaderFetches[b.id]++
					res.HighWatermark, res.LastStableOffset = p.next, p.next
					res.Records = p.read(rp.FetchOffset, int(rp.PartitionMaxBytes))
					if len(res.Records) > 0 {
						c.fetched[b.id]++
					}
				}
				out.Partitions = append(out.Partitions, res)
			}
			resp.Topics = append(resp.Topics, out)
		}
		return resp
	case *wire.ListOffsetsRequest:
		resp := &wire.ListOffsetsResponse{}
		for _, rt := range r.Topics {
			out := wire.ListOffsetsResponseTopic{Topic: rt.Topic}
			for _, rp := range rt.Partitions {
				res := wire.ListOffsetsResponsePartition{Partition: rp.Partition, Timestamp: -1, Offset: -1, LeaderEpoch: -1}
				p := c.partition(rt.Topic, rp.Partition)
				switch {
				case p == nil:
					res.ErrorCode = wire.ErrUnknownTopicOrPartition
				case p.leader != b.id:
					res.ErrorCode = wire.ErrNotLeaderOrFollower
				case rp.Timestamp == wire.EarliestTimestamp:
					res.Offset = 0
				default:
					res.Offset = p.next
				}
				out.Partitions = append(out.Partitions, res)
			}
			resp.Topics = append(resp.Topics, out)
		}
		return resp
	case *wire.OffsetCommitRequest:
		resp := &wire.OffsetCommitResponse{}
		coordinator := c.coordinatorLocked(r.GroupID) == b.id
		for _, rt := range r.Topics {
			out := wire.OffsetCommitResponseTopic{Topic: rt.Topic}
			for _, rp := range rt.Partitions {
				res := wire.PartitionResult{Partition: rp.Partition}
				if !coordinator {
					res.ErrorCode = wire.ErrNotCoordinator
				} else {
					if c.commits[r.GroupID] == nil {
						c.commits[r.GroupID] = map[TopicPartition]int64{}
					}
					c.commits[r.GroupID][TopicPartition{rt.Topic, rp.Partition}] = rp.Offset
				}
				out.Partitions = append(out.Partitions, res)
			}
			resp.Topics = append(resp.Topics, out)
		}
		return resp
	case *wire.OffsetFetchRequest:
		resp := &wire.OffsetFetchResponse{}
		if c.coordinatorLocked(r.GroupID) != b.id {
			resp.ErrorCode = wire.ErrNotCoordinator
			return resp
		}
		for _, rt := range r.Topics {
			out := wire.OffsetFetchResponseTopic{Topic: rt.Topic}
			for _, part := range rt.Partitions {
				off, ok := c.commits[r.GroupID][TopicPartition{rt.Topic, part}]
				if !ok {
					off = -1
				}
				out.Partitions = append(out.Partitions, wire.OffsetFetchResponsePartition{Partition: part, Offset: off, LeaderEpoch: -1})
			}
			resp.Topics = append(resp.Topics, out)
		}
		return resp
	}
	c.t.Errorf("fake broker %d: unexpected %T", b.id, req)
	return &wire.APIVersionsResponse{ErrorCode: wire.ErrInvalidRequest}
}

// coordinatorLocked is the broker leading the group's offsets partition, -1 if the cluster
// has no offsets topic.
func (c *testCluster) coordinatorLocked(group string) int32 {
	ps := c.topics[offsetsTopic]
	if len(ps) == 0 {
		return -1
	}
	return ps[coordinator.Partition(group, int32(len(ps)))].leader
}

func (c *testCluster) partition(topic string, partition int32) *clusterPartition {
	ps := c.topics[topic]
	if partition < 0 || int(partition) >= len(ps) {
		return nil
	}
	return ps[partition]
}

// hint is p's leader as a hint, its broker added to endpoints once (v1 only).
func (c *testCluster) hint(p *clusterPartition, v int16, endpoints *[]wire.MetadataBroker) wire.LeaderHint {
	if v < 1 {
		return wire.NoLeaderHint
	}
	for _, e := range *endpoints {
		if e.NodeID == p.leader {
			return wire.LeaderHint{LeaderID: p.leader, LeaderEpoch: p.epoch}
		}
	}
	lb := c.brokers[p.leader]
	*endpoints = append(*endpoints, wire.MetadataBroker{NodeID: lb.id, Host: lb.host, Port: lb.port})
	return wire.LeaderHint{LeaderID: p.leader, LeaderEpoch: p.epoch}
}

// append stamps and keeps records' batches, returning the first one's base offset.
func (p *clusterPartition) append(records []byte) int64 {
	base := p.next
	for rest := records; len(rest) > 0; {
		b, r, err := batch.Next(rest)
		if err != nil {
			break
		}
		cp := batch.Batch(append([]byte(nil), b...))
		cp.SetBaseOffset(batch.Offset(p.next))
		cp.SetPartitionLeaderEpoch(p.epoch)
		p.log = append(p.log, cp)
		p.next = int64(cp.NextOffset())
		rest = r
	}
	return base
}

// read returns the batches from the one holding offset on, as many as fit in maxBytes (at
// least one).
func (p *clusterPartition) read(offset int64, maxBytes int) []byte {
	var out []byte
	for _, b := range p.log {
		if int64(batch.Batch(b).NextOffset()) > offset {
			if len(out) > 0 && len(out)+len(b) > maxBytes {
				break
			}
			out = append(out, b...)
		}
	}
	if out == nil {
		out = []byte{}
	}
	return out
}

// values decodes every record value of a partition's log, in log order.
func (c *testCluster) values(topic string, partition int32) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, b := range c.topics[topic][partition].log {
		it := batch.Batch(b).Iter(batch.IterOptions{})
		var r batch.Record
		for it.Next(&r) {
			out = append(out, string(r.Value))
		}
	}
	return out
}

// errUndecodable is readFakeRequest's error for a whole frame whose request did not decode.
var errUndecodable = errors.New("undecodable request")

// readFakeRequest reads one request frame from r and decodes it, for the fake brokers of this
// package's tests.
func readFakeRequest(r io.Reader) (wire.RequestHeader, wire.Request, error) {
	var h wire.RequestHeader
	var size [wire.FrameSizeLen]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return h, nil, err
	}
	n, err := wire.ReadFrameSize(size, wire.MaxRequestBytes)
	if err != nil {
		return h, nil, err
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		return h, nil, err
	}
	body, err := h.ReadFrom(frame)
	if err != nil {
		return h, nil, err
	}
	req, err := wire.NewRequest(h.APIKey, h.APIVersion)
	if err != nil || req.ReadFrom(body) != nil {
		return h, nil, errUndecodable
	}
	return h, req, nil
}
