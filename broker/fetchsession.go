package broker

// Fetch sessions (KIP-227): the leader's cache of what each follower fetches, so that a
// follower of many partitions sends, each round, only the partitions whose fetch position
// changed, and hears back only about the partitions with news. A follower of 1,000 idle
// partitions then sends and receives a few dozen bytes a round instead of 1,000 entries.
//
// Behavior (Fetch v2): SessionID 0 with SessionEpoch 0 is a full fetch that asks for a session:
// the response names it in SessionID (0 when the cache has no room and nothing to evict).
// SessionEpoch -1 is a full fetch without a session (a SessionID given with it closes that
// session). A session's later fetches send SessionID and the epochs 1, 2, ... in turn, with the
// partitions whose fields changed (added or updated in the session) and Forgotten the ones it
// drops; the fetch then reads every partition of the session, each from the fields last sent
// for it, and the response lists only those with records, an error, or a high watermark or log
// start other than the session last answered. A SessionID the cache does not hold gets
// FETCH_SESSION_ID_NOT_FOUND, an epoch other than the next INVALID_FETCH_SESSION_EPOCH (both
// whole-request errors, retriable: the follower starts a new session with a full fetch). A
// session with SessionEpoch 0 and its own SessionID is closed and a new one made.
//
// The cache holds fetchSessionSlots sessions (Kafka's max.incremental.fetch.session.cache.slots
// default, 1,000) and evicts the least recently used one for a new session when full. Sessions
// are per broker run: a restarted leader answers FETCH_SESSION_ID_NOT_FOUND.
//
// Ownership: mu guards the cache and every session in it. A session is used by one follower's
// fetches, one at a time (its fetcher is synchronous); a fetch holds its session from the
// request's expansion (begin) to its answer (answer).

import (
	"cmp"
	"container/list"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// fetchSessionSlots is the number of sessions the cache holds (Kafka's
// max.incremental.fetch.session.cache.slots default).
const fetchSessionSlots = 1000

var (
	// errFetchSessionNotFound answers an incremental fetch naming a session the cache does not
	// hold (FETCH_SESSION_ID_NOT_FOUND).
	errFetchSessionNotFound = errors.New("broker: no such fetch session")
	// errFetchSessionEpoch answers an incremental fetch whose epoch is not the session's next
	// (INVALID_FETCH_SESSION_EPOCH).
	errFetchSessionEpoch = errors.New("broker: fetch session epoch out of order")
)

// fetchSessions is the leader's session cache. The zero value is ready to use.
type fetchSessions struct {
	mu   sync.Mutex
	byID map[int32]*fetchSession
	lru  list.List // of *fetchSession, most recently used at the front
}

// fetchSession is one follower's session.
type fetchSession struct {
	id    int32
	epoch int32 // the epoch its next fetch must carry
	elem  *list.Element
	parts map[topicPartition]*sessionPartition
}

// sessionPartition is one partition of a session: the fields its fetcher last sent, and what
// the session last answered for it.
type sessionPartition struct {
	req          wire.FetchRequestPartition
	hw, logStart int64 // last answered; -2 before the first answer
}

// begin resolves req's session (Fetch v2) and, for an incremental fetch, rewrites req.Topics
// to every partition of the session with its last-sent fields. It returns the session to
// answer through (nil: a full fetch without one) or a whole-request error.
func (fs *fetchSessions) begin(req *wire.FetchRequest) (*fetchSession, error) {
	if req.Version < 2 {
		return nil, nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch {
	case req.SessionEpoch == -1:
		if req.SessionID != 0 {
			fs.removeLocked(req.SessionID)
		}
		return nil, nil
	case req.SessionEpoch == 0:
		if req.SessionID != 0 {
			fs.removeLocked(req.SessionID)
		}
		s := fs.newLocked()
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				s.parts[topicPartition{t.Topic, p.Partition}] = &sessionPartition{req: p, hw: -2, logStart: -2}
			}
		}
		return s, nil
	}
	s := fs.byID[req.SessionID]
	if s == nil {
		return nil, errFetchSessionNotFound
	}
	if req.SessionEpoch != s.epoch {
		return nil, errFetchSessionEpoch
	}
	fs.lru.MoveToFront(s.elem)
	for _, t := range req.Forgotten {
		for _, p := range t.Partitions {
			delete(s.parts, topicPartition{t.Topic, p})
		}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := topicPartition{t.Topic, p.Partition}
			if sp := s.parts[tp]; sp != nil {
				sp.req = p
			} else {
				s.parts[tp] = &sessionPartition{req: p, hw: -2, logStart: -2}
			}
		}
	}
	// The fetch reads the whole session, in a stable order (topic, partition).
	tps := make([]topicPartition, 0, len(s.parts))
	for tp := range s.parts {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	req.Topics = req.Topics[:0]
	for _, tp := range tps {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.topic {
			req.Topics = append(req.Topics, wire.FetchRequestTopic{Topic: tp.topic})
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, s.parts[tp].req)
	}
	return s, nil
}

// newLocked makes a session, evicting the least recently used one when the cache is full.
func (fs *fetchSessions) newLocked() *fetchSession {
	if fs.byID == nil {
		fs.byID = map[int32]*fetchSession{}
	}
	if len(fs.byID) >= fetchSessionSlots {
		if back := fs.lru.Back(); back != nil {
			fs.removeLocked(back.Value.(*fetchSession).id)
		}
	}
	id := int32(0)
	for id == 0 || fs.byID[id] != nil {
		id = rand.Int32() // 0 is "no session"; ids are positive
	}
	// Epoch 0 is the full fetch that made it; answering it moves the session to 1, the epoch
	// of its first incremental fetch.
	s := &fetchSession{id: id, epoch: 0, parts: map[topicPartition]*sessionPartition{}}
	s.elem = fs.lru.PushFront(s)
	fs.byID[id] = s
	return s
}

func (fs *fetchSessions) removeLocked(id int32) {
	if s := fs.byID[id]; s != nil {
		fs.lru.Remove(s.elem)
		delete(fs.byID, id)
	}
}

// len is the number of sessions held.
func (fs *fetchSessions) len() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.byID)
}

// answer readies resp, about to be sent, for session s (nil: none): it names the session and
// remembers what it answered for each partition, and, for an incremental fetch, keeps only the
// partitions with news (records, an error, a high watermark or log start other than last
// answered), with their record lengths and segment slices, which are in encoding order, one
// per partition, moving with them (the dropped slices, empty, are released). The session then
// expects its next epoch.
func (fs *fetchSessions) answer(s *fetchSession, incremental bool, resp *wire.FetchResponse, lens []int32, slices []segment.Slice) ([]int32, []segment.Slice) {
	if s == nil {
		return lens, slices
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	resp.SessionID = s.id
	if fs.byID[s.id] != s {
		return lens, slices // evicted meanwhile: the next fetch hears FETCH_SESSION_ID_NOT_FOUND
	}
	s.epoch++
	if s.epoch <= 0 {
		s.epoch = 1 // Kafka's epochs wrap to 1
	}
	k, kept := 0, 0
	nt := 0
	for ti := range resp.Topics {
		t := resp.Topics[ti]
		np := 0
		for _, p := range t.Partitions {
			n, sl := lens[k], slices[k]
			k++
			sp := s.parts[topicPartition{t.Topic, p.Partition}]
			news := sp == nil || n > 0 || p.ErrorCode != wire.NoError || p.HighWatermark != sp.hw || p.LogStartOffset != sp.logStart
			if sp != nil {
				sp.hw, sp.logStart = p.HighWatermark, p.LogStartOffset
			}
			if !news && incremental {
				sl.Release()
				continue
			}
			t.Partitions[np] = p
			np++
			lens[kept], slices[kept] = n, sl
			kept++
		}
		if !incremental {
			continue
		}
		if np > 0 {
			// Swapped, not copied: a pooled response keeps each topic's own partition slice,
			// and two topics sharing one would overwrite each other's on reuse.
			resp.Topics[ti].Partitions = t.Partitions[:np]
			resp.Topics[nt], resp.Topics[ti] = resp.Topics[ti], resp.Topics[nt]
			nt++
		}
	}
	if incremental {
		resp.Topics = resp.Topics[:nt]
	}
	return lens[:kept], slices[:kept]
}
