package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// The controller RPC: a small request/response protocol on the CONTROLLER listener (tag
// tagRPC), between a broker or a controller that does not lead and the active controller.
// Each message is a frame:
//
//	+-----------+------------------------------+
//	| length:4  | JSON rpcRequest/rpcResponse  |
//	+-----------+------------------------------+
//
// length is big-endian and at most maxRPCFrame. One request at a time per connection, each
// answered by one response. JSON for the reason the raft log is JSON: a few requests a second.
// Errors travel as a code (rpcerrors.go) and the message.

const maxRPCFrame = 64 << 20

// rpcOp names a request.
type rpcOp string

const (
	// opPropose: Command is an encoded log entry (encodeCommand); the leader proposes it and
	// answers Apply's result and the entry's index.
	opPropose rpcOp = "propose"
	// opRegister: Broker and Incarnation; answers the broker epoch and (Index) what the broker
	// must have applied to be unfenced.
	opRegister rpcOp = "register"
	// opHeartbeat: BrokerID, Incarnation, Epoch, Applied; answers Fenced.
	opHeartbeat rpcOp = "heartbeat"
	// opStatus: answered by any node: the leader it knows (LeaderID, Addr), its commit index
	// (Index) when it leads, and the cluster id.
	opStatus rpcOp = "status"
	// opJoin: a non-voter (BrokerID) at Addr asks the leader to add it to the raft group.
	opJoin rpcOp = "join"
)

type rpcRequest struct {
	Op rpcOp `json:"op"`
	// TimeoutMs bounds the request on the server (the caller's remaining deadline).
	TimeoutMs   int64       `json:"timeout_ms,omitempty"`
	Command     []byte      `json:"command,omitempty"`
	Broker      *BrokerInfo `json:"broker,omitempty"`
	BrokerID    int32       `json:"broker_id,omitempty"`
	Incarnation string      `json:"incarnation,omitempty"`
	Epoch       int64       `json:"epoch,omitempty"`
	Applied     uint64      `json:"applied,omitempty"`
	Addr        string      `json:"addr,omitempty"`
}

type rpcResponse struct {
	Code      int            `json:"code"`
	Message   string         `json:"message,omitempty"`
	Topic     *TopicMeta     `json:"topic,omitempty"`
	Partition *PartitionMeta `json:"partition,omitempty"`
	Index     uint64         `json:"index,omitempty"`
	Epoch     int64          `json:"epoch,omitempty"`
	Fenced    bool           `json:"fenced,omitempty"`
	LeaderID  int32          `json:"leader_id"`
	Addr      string         `json:"addr,omitempty"`
	ClusterID string         `json:"cluster_id,omitempty"`
	// ProducerIDs is the block a proposed AllocateProducerIDs handed out.
	ProducerIDs *ProducerIDBlock `json:"producer_ids,omitempty"`
	// ElectionResults are a proposed ElectLeaders' outcomes, each error as a code and message.
	ElectionResults []rpcElectionResult `json:"election_results,omitempty"`
}

type rpcElectionResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Code      int    `json:"code,omitempty"`
	Message   string `json:"message,omitempty"`
}

func encodeElectionResults(rs []ElectionResult) []rpcElectionResult {
	var out []rpcElectionResult
	for _, r := range rs {
		e := rpcElectionResult{Topic: r.Topic, Partition: r.Partition, Code: errorCode(r.Err)}
		if r.Err != nil {
			e.Message = r.Err.Error()
		}
		out = append(out, e)
	}
	return out
}

func decodeElectionResults(rs []rpcElectionResult) []ElectionResult {
	var out []ElectionResult
	for _, r := range rs {
		out = append(out, ElectionResult{Topic: r.Topic, Partition: r.Partition, Err: codeError(r.Code, r.Message)})
	}
	return out
}

func writeFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	_, err = w.Write(append(buf, body...))
	return err
}

func readFrame(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxRPCFrame {
		return fmt.Errorf("cluster: rpc frame of %d bytes, at most %d", n, maxRPCFrame)
	}
	// The length is the peer's word, unauthenticated: grow the buffer as the bytes arrive, so
	// that a header alone does not make this node allocate maxRPCFrame.
	body, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err != nil {
		return err
	}
	if len(body) < int(n) {
		return fmt.Errorf("cluster: rpc frame of %d bytes ended after %d: %w", n, len(body), io.ErrUnexpectedEOF)
	}
	return json.Unmarshal(body, v)
}

// rpcIdleTimeout closes a server connection that sends nothing for that long.
const rpcIdleTimeout = 5 * time.Minute

// serveRPC answers one connection's requests in order until it ends or the controller closes
// (the mux closes the connection).
func (c *Controller) serveRPC(conn net.Conn) {
	r := bufio.NewReader(conn)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(rpcIdleTimeout))
		var req rpcRequest
		if err := readFrame(r, &req); err != nil {
			return
		}
		timeout := time.Duration(req.TimeoutMs) * time.Millisecond
		if timeout <= 0 || timeout > c.cfg.ApplyTimeout {
			timeout = c.cfg.ApplyTimeout
		}
		ctx, cancel := contextWithTimeout(c.stop, timeout)
		resp, err := c.handle(ctx, &req)
		cancel()
		resp.Code = errorCode(err)
		if err != nil {
			resp.Message = err.Error()
		}
		_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := writeFrame(conn, &resp); err != nil {
			return
		}
	}
}

// handle serves one request, from the network or from this node itself (callLeader). The
// error is returned as the Go error; serveRPC encodes it.
func (c *Controller) handle(ctx context.Context, req *rpcRequest) (rpcResponse, error) {
	resp := rpcResponse{LeaderID: c.ControllerID()}
	if req.Op == opStatus {
		resp.Addr, _ = c.leaderAddr()
		if c.isLeader() {
			resp.Index = c.raft.CommitIndex()
		}
		resp.ClusterID = c.ClusterID()
		return resp, nil
	}
	if !c.isLeader() {
		return resp, fmt.Errorf("%w: node %d (the leader is %d)", ErrNotLeader, c.cfg.NodeID, resp.LeaderID)
	}
	switch req.Op {
	case opPropose:
		cmd, err := decodeCommand(req.Command)
		if err != nil {
			return resp, err
		}
		res, idx, err := c.proposeLocal(ctx, cmd)
		// Index on a refusal too: what this leader had applied when it refused, which the
		// forwarding node waits for to see an earlier try's commit (ops.go's stale-epoch retry).
		resp.Index = idx
		if err == nil {
			resp.Epoch = res.BrokerEpoch
			if res.Topic.Name != "" {
				resp.Topic = &res.Topic
			}
			if res.Partition.Replicas != nil {
				resp.Partition = &res.Partition
			}
			if res.ProducerIDs.Size > 0 {
				resp.ProducerIDs = &res.ProducerIDs
			}
			resp.ElectionResults = encodeElectionResults(res.ElectionResults)
		}
		return resp, err
	case opRegister:
		if req.Broker == nil {
			return resp, fmt.Errorf("%w: register without a broker", ErrInvalidBroker)
		}
		epoch, want, err := c.live.register(ctx, *req.Broker, req.Incarnation)
		resp.Epoch, resp.Index = epoch, want
		return resp, err
	case opHeartbeat:
		fenced, err := c.live.heartbeat(ctx, req.BrokerID, req.Incarnation, req.Epoch, req.Applied)
		resp.Fenced = fenced
		return resp, err
	case opJoin:
		if req.Addr == "" {
			return resp, fmt.Errorf("%w: join without an address", ErrInvalidBroker)
		}
		if req.BrokerID < 0 || slices.ContainsFunc(c.cfg.Voters, func(v Voter) bool { return v.ID == req.BrokerID }) {
			// Raft's AddNonvoter of a voter's id keeps it a voter but moves it to the new
			// address: one request would cut the voter off and leave its restart refused.
			return resp, fmt.Errorf("%w: node %d asks to join as a non-voter, but it is a voter in controller.quorum.voters %s (or not a node id)",
				ErrInvalidBroker, req.BrokerID, FormatVoters(c.cfg.Voters))
		}
		f := c.raft.AddNonvoter(raftID(req.BrokerID), raftAddress(req.Addr), 0, time.Until(deadlineOf(ctx)))
		if err := f.Error(); err != nil {
			return resp, c.raftErr(err)
		}
		return resp, nil
	}
	return resp, fmt.Errorf("%w: unknown controller request %q", ErrUnknownCommand, req.Op)
}

// rpcClient makes controller RPCs, keeping one idle connection per address for the next call.
type rpcClient struct {
	dial DialFunc
	mu   sync.Mutex
	idle map[string]net.Conn
	shut bool
}

func newRPCClient(dial DialFunc) *rpcClient {
	if dial == nil {
		dial = defaultDial
	}
	return &rpcClient{dial: dial, idle: map[string]net.Conn{}}
}

// errLink marks a failure to reach a controller or to hear its answer: the caller re-resolves
// the leader and retries (the request may or may not have been served).
var errLink = errors.New("cluster: controller link")

// errNotSent marks a link failure before the request was sent (the dial): the try did nothing.
var errNotSent = errors.New("request not sent")

// call sends req to addr and returns the response; an error the server answered comes back as
// the sentinel its code names (codeError).
func (cl *rpcClient) call(ctx context.Context, addr string, req *rpcRequest) (rpcResponse, error) {
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMs = max(time.Until(dl).Milliseconds(), 1)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	conn := cl.take(addr)
	if conn == nil {
		var err error
		if conn, err = dialTagged(ctx, cl.dial, addr, tagRPC); err != nil {
			return rpcResponse{}, fmt.Errorf("%w: %w: dial %s: %w", errLink, errNotSent, addr, err)
		}
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var resp rpcResponse
	err := writeFrame(conn, req)
	if err == nil {
		err = readFrame(conn, &resp)
	}
	if err != nil {
		_ = conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return rpcResponse{}, fmt.Errorf("%w: %s %s: %w", errLink, req.Op, addr, err)
	}
	if !stop() {
		_ = conn.Close() // the deadline may have been set: do not reuse
	} else {
		_ = conn.SetDeadline(time.Time{})
		cl.put(addr, conn)
	}
	return resp, codeError(resp.Code, resp.Message)
}

func (cl *rpcClient) take(addr string) net.Conn {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	c := cl.idle[addr]
	delete(cl.idle, addr)
	return c
}

func (cl *rpcClient) put(addr string, c net.Conn) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.shut || cl.idle[addr] != nil {
		_ = c.Close()
		return
	}
	cl.idle[addr] = c
}

func (cl *rpcClient) close() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.shut = true
	for a, c := range cl.idle {
		_ = c.Close()
		delete(cl.idle, a)
	}
}
