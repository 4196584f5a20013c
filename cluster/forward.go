package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Routing to the active controller. Every write goes through the raft leader; a node that does
// not lead forwards it there (rpc.go). The leader is re-resolved after NOT_LEADER, a lost
// leadership or a dropped link, and the request retried until ctx ends, so that a metadata write
// in flight survives a controller failover. A retried try may find its earlier try committed
// (the link or the leadership went after the leader proposed it), so each command must survive
// that:
//   - createTopic is idempotent: a topic id is drawn once, by the first proposer, and re-creating
//     the same topic with the same id succeeds (the fsm's rule).
//   - registerBroker may commit twice; harmless: each commit is a new broker epoch, and the
//     caller uses the one the last try answered (the latest).
//   - deleteTopic carries the topic's id (DeleteTopic); when an earlier try was ambiguous, the
//     later UNKNOWN_TOPIC for that id is the earlier try's success (errMayHaveCommitted).
//   - setPartitionLeader and alterPartition carry the epochs they expect, so they are never
//     applied twice; a retry after a commit is refused with a stale epoch, which
//     SetPartitionLeader and AlterPartition (ops.go) answer as success when the earlier try was
//     ambiguous and the partition is at the requested leader or ISR one epoch on.
//   - allocateProducerIDs may commit twice: each commit is a new block, the caller uses the one
//     the last try answered, and the earlier one is never handed out again (wasted ids only).
//   - fences, unfences, heartbeats and configs set the state to a value: applying one again
//     changes nothing (the dry run submits nothing).

// propose submits cmd through the active controller and returns Apply's result. Once this
// returns, this node's Metadata() reflects the command (read-your-writes on any node).
func (c *Controller) propose(ctx context.Context, cmd command) (applyResult, error) {
	res, _, err := c.proposeIndexed(ctx, cmd)
	return res, err
}

func (c *Controller) proposeIndexed(ctx context.Context, cmd command) (applyResult, uint64, error) {
	if c.closed.Load() {
		return applyResult{}, 0, ErrClosed
	}
	if c.cfg.Voters == nil {
		// Alone: this node leads or nothing does; there is nobody to forward to.
		return c.proposeLocal(ctx, cmd)
	}
	data, err := encodeCommand(cmd)
	if err != nil {
		return applyResult{}, 0, err
	}
	var res applyResult
	resp, err := c.callLeader(ctx, &rpcRequest{Op: opPropose, Command: data}, func(ctx context.Context) (rpcResponse, error) {
		r, idx, err := c.proposeLocal(ctx, cmd)
		res = r
		return rpcResponse{Index: idx, Epoch: r.BrokerEpoch}, err
	})
	if resp.Topic != nil {
		res.Topic = *resp.Topic
	}
	if resp.Partition != nil {
		res.Partition = *resp.Partition
	}
	if resp.ProducerIDs != nil {
		res.ProducerIDs = *resp.ProducerIDs
	}
	if resp.ElectionResults != nil {
		res.ElectionResults = decodeElectionResults(resp.ElectionResults)
	}
	res.BrokerEpoch = resp.Epoch
	res.Err = err
	if err == nil {
		err = c.awaitApplied(ctx, resp.Index)
	}
	return res, resp.Index, err
}

// callLeader runs req on the active controller: local when this node leads, else over the
// controller RPC, retrying a retriable failure with a short backoff until ctx ends (or, without
// a deadline, ApplyTimeout). The error after the last try wraps ErrNotLeader: retriable.
func (c *Controller) callLeader(ctx context.Context, req *rpcRequest, local func(context.Context) (rpcResponse, error)) (rpcResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.ApplyTimeout)
		defer cancel()
	}
	backoff := 10 * time.Millisecond
	var last error
	ambiguous := false
	for {
		if c.closed.Load() {
			return rpcResponse{}, ErrClosed
		}
		addr, id := c.raft.LeaderWithID()
		var resp rpcResponse
		var err error
		switch {
		case id == c.self:
			if local != nil {
				resp, err = local(ctx)
			} else {
				resp, err = c.handle(ctx, req)
			}
		case id != "":
			resp, err = c.rpcc.call(ctx, string(addr), req)
		default:
			err = fmt.Errorf("%w: no leader known", ErrNotLeader)
		}
		if !retriable(err) {
			if err != nil && ambiguous {
				// last by text only: the result must not match the retriable causes.
				err = fmt.Errorf("%w (%w; earlier try: %v)", err, errMayHaveCommitted, last)
			}
			return resp, err
		}
		// A try that reached a leader may have committed before the link or the leadership
		// went; one that found no leader, or could not dial it, did not.
		if id != "" && !errors.Is(err, errNotSent) {
			ambiguous = true
		}
		last = err
		select {
		case <-ctx.Done():
			return rpcResponse{}, fmt.Errorf("cluster: no active controller answered %s within the deadline: %w (last: %w)", req.Op, ErrNotLeader, last)
		case <-c.stop:
			return rpcResponse{}, ErrClosed
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// retriable reports whether another active controller may succeed where this try failed.
func retriable(err error) bool {
	if err == nil || errors.Is(err, ErrClosed) {
		return false
	}
	return errors.Is(err, ErrNotLeader) || errors.Is(err, errLink)
}

// awaitApplied waits until this node's state machine has applied index (a forwarded command's).
func (c *Controller) awaitApplied(ctx context.Context, index uint64) error {
	if index == 0 || c.indexed.applied.Load() >= index {
		return nil
	}
	ch, cancel := c.Subscribe()
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond) // an applied entry that changed nothing notifies no one
	defer tick.Stop()
	for c.indexed.applied.Load() < index {
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("cluster: committed at index %d, applied here only up to %d: %w", index, c.indexed.applied.Load(), ctx.Err())
		case <-c.stop:
			return ErrClosed
		}
	}
	return nil
}

func (c *Controller) isLeader() bool { return c.raft.State() == raft.Leader }

// leaderAddr is the active controller's CONTROLLER address and id, or "" and -1.
func (c *Controller) leaderAddr() (string, int32) {
	addr, _ := c.raft.LeaderWithID()
	return string(addr), c.ControllerID()
}

func raftID(id int32) raft.ServerID              { return raft.ServerID(strconv.Itoa(int(id))) }
func raftAddress(addr string) raft.ServerAddress { return raft.ServerAddress(addr) }

// contextWithTimeout is a context that ends after d or when stop closes.
func contextWithTimeout(stop <-chan struct{}, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func deadlineOf(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(5 * time.Second)
}

// appliedIndex is how far this node's state machine has got: raft's applied index (which covers
// entries that are not commands, but is set only after the FSM goroutine was handed the batch,
// sometimes after it applied it) or the last command the FSM applied, whichever is further.
func (c *Controller) appliedIndex() uint64 {
	return max(c.raft.AppliedIndex(), c.indexed.applied.Load())
}
