package broker

import (
	"sync"
	"time"
)

// Replication throttles (Kafka's leader/follower.replication.throttled.rate): while a
// reassignment adds replicas, the bytes they catch up with can be capped so that the move does
// not take the disks and links its partitions' producers and consumers need. Throttled
// replicas are the adding replicas of the moves in progress (partition.throttled, from the
// metadata); the rates are dynamic broker configs (the broker's own, else the cluster-wide
// default; 0 or unset: none).
//
// The follower side is enforced here: a fetcher leaves a throttled partition out of its
// fetches while the broker's follower quota is spent (replicaFetcher.plan), so the partition's
// catch-up slows to the rate and every other partition fetched on the same connection is not
// held up. The leader side (leader.replication.throttled.rate) caps what the leader's answers
// to throttled followers carry (fetch.go, throttledFollowerBytes).

// replicationQuota is one side's byte rate cap, shared by the fetchers (or the fetch
// handlers): a token bucket holding at most one second of the rate. take records bytes moved,
// which may leave it in debt; blockedUntil says when the debt will have been paid off.
// Time is passed in, so tests drive it directly.
//
// Ownership: mu guards every field.
type replicationQuota struct {
	mu     sync.Mutex
	rate   float64 // bytes per second; 0: no cap
	tokens float64 // may be negative: debt
	at     time.Time
}

// setRate changes the cap (0: none). The allowance starts full at a new rate.
func (q *replicationQuota) setRate(bytesPerSec int64, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if float64(bytesPerSec) == q.rate {
		return
	}
	q.rate, q.tokens, q.at = float64(max(bytesPerSec, 0)), float64(max(bytesPerSec, 0)), now
}

// limit is the cap, 0 for none.
func (q *replicationQuota) limit() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(q.rate)
}

func (q *replicationQuota) refillLocked(now time.Time) {
	if now.After(q.at) {
		q.tokens = min(q.rate, q.tokens+now.Sub(q.at).Seconds()*q.rate)
		q.at = now
	}
}

// take records n bytes moved at now.
func (q *replicationQuota) take(n int, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rate == 0 {
		return
	}
	q.refillLocked(now)
	q.tokens -= float64(n)
}

// blockedUntil is the time until which throttled bytes must wait (the debt paid off at the
// rate); the zero time when they may move now.
func (q *replicationQuota) blockedUntil(now time.Time) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rate == 0 {
		return time.Time{}
	}
	q.refillLocked(now)
	if q.tokens > 0 {
		return time.Time{}
	}
	return now.Add(time.Duration((-q.tokens + 1) / q.rate * float64(time.Second)))
}

// throttledFollower reports whether this broker's replica of p is one a move is adding: its
// fetches are capped by the follower quota.
func (b *Broker) throttledFollower(p *partition) bool {
	a := p.adding.Load()
	return a != nil && containsID(*a, b.cfg.NodeID)
}

// throttledReplica reports whether the follower id's replica of p is one a move is adding: the
// leader caps what it sends it by the leader quota.
func throttledReplica(p *partition, id int32) bool {
	a := p.adding.Load()
	return a != nil && containsID(*a, id)
}
