package group

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// State is the state of a group, with Kafka's names.
type State uint8

// The states of a group.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// Config holds the coordinator settings a group follows.
type Config struct {
	InitialRebalanceDelay                time.Duration // group.initial.rebalance.delay.ms
	MinSessionTimeout, MaxSessionTimeout time.Duration // group.min/max.session.timeout.ms
	MaxSize                              int           // group.max.size; 0 = unlimited
	// NewMemberID makes a member id; nil = clientID + "-" + 128 random bits in hex.
	NewMemberID func(clientID string) string
	// ValidateAssignment checks one member's assignment from the leader; nil = accept.
	ValidateAssignment func(assignment []byte) wire.ErrorCode
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{InitialRebalanceDelay: 3 * time.Second, MinSessionTimeout: 6 * time.Second, MaxSessionTimeout: 30 * time.Minute}
}

// Protocol is one assignment protocol a member supports, with its metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup request.
type JoinRequest struct {
	MemberID, InstanceID, ClientID, ClientHost string
	SessionTimeout, RebalanceTimeout           time.Duration
	ProtocolType                               string
	Protocols                                  []Protocol
	Reason                                     string
}

// JoinResponse is a JoinGroup response.
type JoinResponse struct {
	Err                    wire.ErrorCode
	Generation             int32
	ProtocolType, Protocol string
	Leader, MemberID       string
	SkipAssignment         bool
	Members                []JoinMember // leader only
}

// JoinMember is a member as the leader sees it in its JoinResponse.
type JoinMember struct {
	MemberID, InstanceID string
	Metadata             []byte
}

// SyncRequest is a SyncGroup request.
type SyncRequest struct {
	MemberID, InstanceID   string
	Generation             int32
	ProtocolType, Protocol string
	Assignments            map[string][]byte // member id -> assignment; leader only
}

// SyncResponse is a SyncGroup response.
type SyncResponse struct {
	Err                    wire.ErrorCode
	ProtocolType, Protocol string
	Assignment             []byte
}

// Reply answers a parked request of the member.
type Reply struct {
	MemberID string
	Join     *JoinResponse
	Sync     *SyncResponse
}

// Effects is what a call asks the coordinator to do.
type Effects struct {
	Replies []Reply // answers to parked requests; after Persist commits when Persist is set
	Persist *Record // group snapshot to write to __consumer_offsets (acks=all)
}

type member struct {
	id, instanceID, clientID, clientHost string
	sessionTimeout, rebalanceTimeout     time.Duration
	protocolType                         string
	protocols                            []Protocol
	assignment                           []byte
	joinParked, syncParked               bool
	synced                               bool      // has sent a SyncGroup this generation
	expires                              time.Time // session deadline
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) supports(protocol string) bool {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return true
		}
	}
	return false
}

// inflight is a Persist whose Replies wait for the write.
type inflight struct {
	generation int32
	replies    []Reply
	// a static member's id replacement, undone if the write fails
	static        bool
	instanceID    string
	oldID, newID  string
	oldMember     member
	stateAtChange State
}

// Group is the state of one consumer group. It is owned by the coordinator (see the
// package doc) and is not safe for concurrent use.
type Group struct {
	id  string
	cfg Config

	state          State
	generation     int32
	protocolType   string
	protocol       string
	leader         string
	stateTimestamp time.Time

	members map[string]*member
	order   []string          // member ids in join order
	static  map[string]string // instance id -> member id
	pending map[string]time.Time

	// PreparingRebalance: when the join completes at the latest.
	joinDeadline time.Time
	// initial delay (from Empty): still delaying, a member joined during this delay,
	// and the rebalance time left for more delays.
	initialDelay     bool
	newMemberAdded   bool
	initialRemaining time.Duration
	// CompletingRebalance and Stable: members that have not sent a SyncGroup of this
	// generation by then are removed (Kafka's pending-sync timeout, the rebalance timeout).
	syncDeadline time.Time

	inflight []inflight
}

// New is an Empty group at generation 0. A zero MaxSessionTimeout means Kafka's 30 minutes
// (a zero MinSessionTimeout, InitialRebalanceDelay or MaxSize means none).
func New(id string, cfg Config, now time.Time) *Group {
	if cfg.MaxSessionTimeout == 0 {
		cfg.MaxSessionTimeout = 30 * time.Minute
	}
	return &Group{id: id, cfg: cfg, stateTimestamp: now, members: map[string]*member{},
		static: map[string]string{}, pending: map[string]time.Time{}}
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// State is the current state.
func (g *Group) State() State { return g.state }

// Generation is the current generation.
func (g *Group) Generation() int32 { return g.generation }

// ProtocolType is the group's protocol type ("" before any member joined).
func (g *Group) ProtocolType() string { return g.protocolType }

// Protocol is the chosen protocol ("" before a generation chose one).
func (g *Group) Protocol() string { return g.protocol }

// Leader is the leader's member id.
func (g *Group) Leader() string { return g.leader }

// Empty reports whether the group has no members.
func (g *Group) Empty() bool { return len(g.members) == 0 }

func (g *Group) newMemberID(clientID string) string {
	if g.cfg.NewMemberID != nil {
		return g.cfg.NewMemberID(clientID)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return clientID + "-" + hex.EncodeToString(b[:])
}

func (g *Group) transition(now time.Time, s State) {
	g.state = s
	g.stateTimestamp = now
}

// fenced reports whether instanceID is known with another member id.
func (g *Group) fenced(memberID, instanceID string) bool {
	if instanceID == "" {
		return false
	}
	id, ok := g.static[instanceID]
	return ok && id != memberID
}

// candidates are the protocols every member supports, in the first member's order.
func (g *Group) candidates() []string {
	if len(g.order) == 0 {
		return nil
	}
	var out []string
	for _, p := range g.members[g.order[0]].protocols {
		all := true
		for _, id := range g.order[1:] {
			if !g.members[id].supports(p.Name) {
				all = false
				break
			}
		}
		if all && !slices.Contains(out, p.Name) {
			out = append(out, p.Name)
		}
	}
	return out
}

func (g *Group) supportsProtocols(protocolType string, protocols []Protocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, c := range g.candidates() {
		for _, p := range protocols {
			if p.Name == c {
				return true
			}
		}
	}
	return false
}

// selectProtocol is the vote: each member votes for the first protocol it lists among
// those every member supports; ties go to the earlier candidate.
func (g *Group) selectProtocol() string {
	cands := g.candidates()
	votes := map[string]int{}
	for _, id := range g.order {
		for _, p := range g.members[id].protocols {
			if slices.Contains(cands, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, c := range cands {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func (g *Group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// sameProtocols is Kafka's test of a known member's rejoin: the same protocols in the same
// order with the same metadata bytes.
func sameProtocols(a, b []Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y Protocol) bool { return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata) })
}

// sameSubscription reports whether two metadata of one protocol ask for the same assignment.
// For protocol type "consumer" that is the same topics (in any order) and rack: the owned
// partitions, their generation and the user data describe what the member held, which a
// restarted static member no longer knows. Other protocol types compare the bytes.
func sameSubscription(protocolType string, a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if protocolType != wire.ConsumerProtocolType {
		return false
	}
	var x, y wire.ConsumerSubscription
	if x.ReadFrom(a) != nil || y.ReadFrom(b) != nil {
		return false
	}
	tx, ty := slices.Clone(x.Topics), slices.Clone(y.Topics)
	slices.Sort(tx)
	slices.Sort(ty)
	rack := func(r *string) string {
		if r == nil {
			return ""
		}
		return *r
	}
	return slices.Equal(slices.Compact(tx), slices.Compact(ty)) && rack(x.RackID) == rack(y.RackID)
}

func errJoin(id string, err wire.ErrorCode) *JoinResponse {
	return &JoinResponse{Err: err, MemberID: id, Generation: -1}
}

// Join handles a JoinGroup request. A nil resp means the request is parked under memberID
// and answered in a later (or this) Effects. A member joining again while its join is
// parked has the earlier join answered ErrRebalanceInProgress in fx.
func (g *Group) Join(now time.Time, req JoinRequest) (memberID string, resp *JoinResponse, fx Effects) {
	if g.state == Dead {
		return req.MemberID, errJoin(req.MemberID, wire.ErrCoordinatorNotAvailable), fx
	}
	if req.SessionTimeout < g.cfg.MinSessionTimeout || req.SessionTimeout > g.cfg.MaxSessionTimeout {
		return req.MemberID, errJoin(req.MemberID, wire.ErrInvalidSessionTimeout), fx
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		return req.MemberID, errJoin(req.MemberID, wire.ErrInconsistentGroupProtocol), fx
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout
	}
	if req.MemberID == "" {
		return g.joinNew(now, req)
	}
	if _, ok := g.pending[req.MemberID]; ok && req.InstanceID == "" {
		if g.full(false) {
			return req.MemberID, errJoin(req.MemberID, wire.ErrGroupMaxSizeReached), fx
		}
		delete(g.pending, req.MemberID)
		id, fx := g.addAndRebalance(now, req.MemberID, req)
		return id, nil, fx
	}
	if g.fenced(req.MemberID, req.InstanceID) {
		return req.MemberID, errJoin(req.MemberID, wire.ErrFencedInstanceID), fx
	}
	m, ok := g.members[req.MemberID]
	if !ok {
		return req.MemberID, errJoin(req.MemberID, wire.ErrUnknownMemberID), fx
	}
	if m.instanceID != req.InstanceID && m.instanceID != "" {
		return req.MemberID, errJoin(req.MemberID, wire.ErrFencedInstanceID), fx
	}
	switch g.state {
	case PreparingRebalance:
		fx = g.updateAndPark(now, m, req)
		return m.id, nil, g.merge(fx, g.tryCompleteJoin(now))
	case CompletingRebalance:
		if sameProtocols(m.protocols, req.Protocols) {
			m.expires = now.Add(m.sessionTimeout)
			return m.id, g.joinResponse(m, false), fx
		}
	case Stable:
		if m.id != g.leader && sameProtocols(m.protocols, req.Protocols) {
			m.expires = now.Add(m.sessionTimeout)
			r := g.joinResponse(m, false)
			r.Members = nil
			return m.id, r, fx
		}
	}
	fx = g.updateAndPark(now, m, req)
	fx.Replies = append(fx.Replies, g.prepareRebalance(now)...)
	fx = g.merge(fx, g.tryCompleteJoin(now))
	return m.id, nil, fx
}

// full reports whether the group cannot take one more member (pending members count).
func (g *Group) full(newPending bool) bool {
	if g.cfg.MaxSize <= 0 {
		return false
	}
	n := len(g.members)
	if newPending {
		n += len(g.pending)
	}
	return n >= g.cfg.MaxSize
}

func (g *Group) joinNew(now time.Time, req JoinRequest) (string, *JoinResponse, Effects) {
	var fx Effects
	if req.InstanceID == "" {
		if g.full(true) {
			return "", errJoin("", wire.ErrGroupMaxSizeReached), fx
		}
		id := g.newMemberID(req.ClientID)
		g.pending[id] = now.Add(req.SessionTimeout)
		return id, errJoin(id, wire.ErrMemberIDRequired), fx
	}
	oldID, known := g.static[req.InstanceID]
	if !known {
		if g.full(false) {
			return "", errJoin("", wire.ErrGroupMaxSizeReached), fx
		}
		id, fx := g.addAndRebalance(now, g.newMemberID(req.ClientID), req)
		return id, nil, fx
	}
	// A static member restarts: it takes a new member id and the old one is fenced.
	old := g.members[oldID]
	newID := g.newMemberID(req.ClientID)
	saved := *old
	fx.Replies = append(fx.Replies, g.answerParked(old, wire.ErrFencedInstanceID)...)
	g.replaceID(old, newID)
	old.clientID, old.clientHost = req.ClientID, req.ClientHost
	old.sessionTimeout, old.rebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	old.expires = now.Add(req.SessionTimeout)
	// In Stable the restart rebalances only if it changes the assignment's input: the vote
	// would choose another protocol (Kafka's test), or the member's metadata of the chosen
	// protocol asks for something else (ours; Kafka does not look, so a changed
	// subscription would wait for the next rebalance). Metadata of the other protocols, and
	// the partitions the member says it owns, do not count.
	old.protocolType = req.ProtocolType
	old.protocols = slices.Clone(req.Protocols)
	if g.state == Stable && old.supports(g.protocol) && g.selectProtocol() == g.protocol &&
		sameSubscription(g.protocolType, saved.metadata(g.protocol), old.metadata(g.protocol)) {
		r := g.joinResponse(old, old.id == g.leader)
		r.SkipAssignment = old.id == g.leader
		if !r.SkipAssignment {
			r.Members = nil
		}
		rec := g.Snapshot(now)
		fx.Persist = rec
		reply := Reply{MemberID: newID, Join: r}
		fx.Replies = append(fx.Replies, reply)
		g.addInflight(inflight{generation: g.generation, replies: []Reply{reply},
			static: true, instanceID: req.InstanceID, oldID: oldID, newID: newID, oldMember: saved, stateAtChange: g.state})
		return newID, nil, fx
	}
	fx = g.merge(fx, g.updateAndPark(now, old, req))
	if g.state != PreparingRebalance {
		fx.Replies = append(fx.Replies, g.prepareRebalance(now)...)
	}
	fx = g.merge(fx, g.tryCompleteJoin(now))
	return newID, nil, fx
}

// addInflight remembers the Replies of a Persist until PersistFailed or PersistDone. A
// Persist replaces an earlier one of the same generation (whose Replies the coordinator
// delivered or is answering), and only the current and the previous generation are kept.
func (g *Group) addInflight(f inflight) {
	g.inflight = slices.DeleteFunc(g.inflight, func(o inflight) bool {
		return o.generation == f.generation || o.generation < f.generation-1
	})
	g.inflight = append(g.inflight, f)
}

func (g *Group) replaceID(m *member, newID string) {
	delete(g.members, m.id)
	i := slices.Index(g.order, m.id)
	if g.leader == m.id {
		g.leader = newID
	}
	m.id = newID
	g.members[newID] = m
	g.order[i] = newID
	if m.instanceID != "" {
		g.static[m.instanceID] = newID
	}
}

func (g *Group) merge(a, b Effects) Effects {
	a.Replies = append(a.Replies, b.Replies...)
	if b.Persist != nil {
		a.Persist = b.Persist
	}
	return a
}

func (g *Group) addAndRebalance(now time.Time, id string, req JoinRequest) (string, Effects) {
	m := &member{id: id, instanceID: req.InstanceID}
	g.members[id] = m
	g.order = append(g.order, id)
	if req.InstanceID != "" {
		g.static[req.InstanceID] = id
	}
	if len(g.members) == 1 {
		g.protocolType = req.ProtocolType
	}
	if g.leader == "" {
		g.leader = id
	}
	fx := g.updateAndPark(now, m, req)
	if g.state == PreparingRebalance && g.initialDelay {
		g.newMemberAdded = true
	}
	fx.Replies = append(fx.Replies, g.prepareRebalance(now)...)
	return id, g.merge(fx, g.tryCompleteJoin(now))
}

func (g *Group) updateAndPark(now time.Time, m *member, req JoinRequest) Effects {
	var fx Effects
	if m.joinParked {
		fx.Replies = append(fx.Replies, Reply{MemberID: m.id, Join: errJoin(m.id, wire.ErrRebalanceInProgress)})
	}
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	m.sessionTimeout, m.rebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	m.protocolType = req.ProtocolType
	m.protocols = slices.Clone(req.Protocols)
	m.joinParked = true
	m.expires = now.Add(m.sessionTimeout)
	return fx
}

// answerParked answers a member's parked join and sync with err.
func (g *Group) answerParked(m *member, err wire.ErrorCode) []Reply {
	var out []Reply
	if m.joinParked {
		out = append(out, Reply{MemberID: m.id, Join: errJoin(m.id, err)})
		m.joinParked = false
	}
	if m.syncParked {
		out = append(out, Reply{MemberID: m.id, Sync: &SyncResponse{Err: err}})
		m.syncParked = false
	}
	return out
}

// prepareRebalance moves the group to PreparingRebalance (if it is not there) and answers
// parked syncs ErrRebalanceInProgress.
func (g *Group) prepareRebalance(now time.Time) []Reply {
	if g.state == PreparingRebalance {
		return nil
	}
	var out []Reply
	for _, id := range g.order {
		m := g.members[id]
		if m.syncParked {
			out = append(out, Reply{MemberID: id, Sync: &SyncResponse{Err: wire.ErrRebalanceInProgress}})
			m.syncParked = false
		}
	}
	if g.state == Empty && g.cfg.InitialRebalanceDelay > 0 {
		g.initialDelay = true
		g.newMemberAdded = false
		g.initialRemaining = max(g.maxRebalanceTimeout()-g.cfg.InitialRebalanceDelay, 0)
		g.joinDeadline = now.Add(g.cfg.InitialRebalanceDelay)
	} else {
		g.initialDelay = false
		g.joinDeadline = now.Add(g.maxRebalanceTimeout())
	}
	g.syncDeadline = time.Time{}
	g.transition(now, PreparingRebalance)
	return out
}

func (g *Group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if !m.joinParked {
			return false
		}
	}
	return true
}

func (g *Group) tryCompleteJoin(now time.Time) Effects {
	if g.state != PreparingRebalance || g.initialDelay || !g.allJoined() {
		return Effects{}
	}
	return g.completeJoin(now)
}

// completeJoin ends PreparingRebalance: members that did not rejoin are removed and the
// next generation starts.
func (g *Group) completeJoin(now time.Time) Effects {
	var fx Effects
	g.initialDelay = false
	g.joinDeadline = time.Time{}
	for _, id := range slices.Clone(g.order) {
		if m := g.members[id]; !m.joinParked {
			g.remove(m)
		}
	}
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.transition(now, Empty)
		fx.Persist = g.Snapshot(now)
		return fx
	}
	g.protocol = g.selectProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.order[0]
	}
	g.transition(now, CompletingRebalance)
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	for _, id := range g.order {
		m := g.members[id]
		m.joinParked = false
		m.synced = false
		m.expires = now.Add(m.sessionTimeout)
		fx.Replies = append(fx.Replies, Reply{MemberID: id, Join: g.joinResponse(m, id == g.leader)})
	}
	return fx
}

func (g *Group) joinResponse(m *member, leader bool) *JoinResponse {
	r := &JoinResponse{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol,
		Leader: g.leader, MemberID: m.id}
	if leader {
		for _, id := range g.order {
			o := g.members[id]
			r.Members = append(r.Members, JoinMember{MemberID: id, InstanceID: o.instanceID, Metadata: o.metadata(g.protocol)})
		}
	}
	return r
}

// remove drops a member (answering nothing; callers answer its parked requests).
func (g *Group) remove(m *member) {
	delete(g.members, m.id)
	g.order = slices.DeleteFunc(g.order, func(id string) bool { return id == m.id })
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	if len(g.members) == 0 {
		g.protocolType = ""
	}
}

// removeAndUpdate removes a member and moves the group on: Stable/CompletingRebalance start
// a rebalance, PreparingRebalance may complete.
func (g *Group) removeAndUpdate(now time.Time, m *member, err wire.ErrorCode) Effects {
	var fx Effects
	fx.Replies = g.answerParked(m, err)
	g.remove(m)
	switch g.state {
	case Stable, CompletingRebalance:
		fx.Replies = append(fx.Replies, g.prepareRebalance(now)...)
		fx = g.merge(fx, g.tryCompleteJoin(now))
	case PreparingRebalance:
		fx = g.merge(fx, g.tryCompleteJoin(now))
	}
	return fx
}

// Sync handles a SyncGroup request; a nil resp means it is parked.
func (g *Group) Sync(now time.Time, req SyncRequest) (resp *SyncResponse, fx Effects) {
	fail := func(err wire.ErrorCode) (*SyncResponse, Effects) { return &SyncResponse{Err: err}, Effects{} }
	if g.state == Dead {
		return fail(wire.ErrCoordinatorNotAvailable)
	}
	if g.fenced(req.MemberID, req.InstanceID) {
		return fail(wire.ErrFencedInstanceID)
	}
	m, ok := g.members[req.MemberID]
	if !ok {
		return fail(wire.ErrUnknownMemberID)
	}
	if m.instanceID != "" && req.InstanceID != m.instanceID {
		return fail(wire.ErrFencedInstanceID)
	}
	if req.Generation != g.generation {
		return fail(wire.ErrIllegalGeneration)
	}
	if (req.ProtocolType != "" && req.ProtocolType != g.protocolType) || (req.Protocol != "" && req.Protocol != g.protocol) {
		return fail(wire.ErrInconsistentGroupProtocol)
	}
	switch g.state {
	case PreparingRebalance:
		return fail(wire.ErrRebalanceInProgress)
	case Stable:
		m.expires = now.Add(m.sessionTimeout)
		g.markSynced(m)
		return &SyncResponse{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}, fx
	case CompletingRebalance:
	default:
		return fail(wire.ErrUnknownMemberID)
	}
	if m.id == g.leader && g.cfg.ValidateAssignment != nil {
		for _, id := range g.order {
			if err := g.cfg.ValidateAssignment(req.Assignments[id]); err != wire.NoError {
				return fail(err)
			}
		}
	}
	if m.syncParked {
		fx.Replies = append(fx.Replies, Reply{MemberID: m.id, Sync: &SyncResponse{Err: wire.ErrRebalanceInProgress}})
	}
	m.syncParked = true
	m.expires = now.Add(m.sessionTimeout)
	g.markSynced(m)
	if m.id != g.leader {
		return nil, fx
	}
	for _, id := range g.order {
		g.members[id].assignment = slices.Clone(req.Assignments[id])
	}
	g.transition(now, Stable)
	fx.Persist = g.Snapshot(now)
	var replies []Reply
	for _, id := range g.order {
		o := g.members[id]
		if o.syncParked {
			o.syncParked = false
			replies = append(replies, Reply{MemberID: id, Sync: &SyncResponse{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: o.assignment}})
		}
	}
	fx.Replies = append(fx.Replies, replies...)
	g.addInflight(inflight{generation: g.generation, replies: replies})
	return nil, fx
}

func (g *Group) markSynced(m *member) {
	m.synced = true
	for _, o := range g.members {
		if !o.synced {
			return
		}
	}
	g.syncDeadline = time.Time{}
}

// Heartbeat handles a Heartbeat request.
func (g *Group) Heartbeat(now time.Time, memberID, instanceID string, generation int32) (wire.ErrorCode, Effects) {
	if g.state == Dead {
		return wire.ErrCoordinatorNotAvailable, Effects{}
	}
	if g.fenced(memberID, instanceID) {
		return wire.ErrFencedInstanceID, Effects{}
	}
	m, ok := g.members[memberID]
	if !ok {
		return wire.ErrUnknownMemberID, Effects{}
	}
	if m.instanceID != "" && instanceID != m.instanceID {
		return wire.ErrFencedInstanceID, Effects{}
	}
	if generation != g.generation {
		return wire.ErrIllegalGeneration, Effects{}
	}
	m.expires = now.Add(m.sessionTimeout)
	if g.state == PreparingRebalance {
		return wire.ErrRebalanceInProgress, Effects{}
	}
	return wire.NoError, Effects{}
}

// Leave handles one member of a LeaveGroup request. With an instance id the member is
// found by it; a member id that does not match it is fenced.
func (g *Group) Leave(now time.Time, memberID, instanceID string) (wire.ErrorCode, Effects) {
	if g.state == Dead {
		return wire.ErrCoordinatorNotAvailable, Effects{}
	}
	if instanceID != "" {
		id, ok := g.static[instanceID]
		if !ok {
			return wire.ErrUnknownMemberID, Effects{}
		}
		if memberID != "" && memberID != id {
			return wire.ErrFencedInstanceID, Effects{}
		}
		memberID = id
	}
	if _, ok := g.pending[memberID]; ok {
		delete(g.pending, memberID)
		return wire.NoError, g.tryCompleteJoin(now)
	}
	m, ok := g.members[memberID]
	if !ok {
		return wire.ErrUnknownMemberID, Effects{}
	}
	return wire.NoError, g.removeAndUpdate(now, m, wire.ErrUnknownMemberID)
}

// Tick expires pending members and sessions and ends a join phase whose deadline passed.
func (g *Group) Tick(now time.Time) Effects {
	var fx Effects
	if g.state == Dead {
		return fx
	}
	for id, exp := range g.pending {
		if !now.Before(exp) {
			delete(g.pending, id)
		}
	}
	for _, id := range slices.Clone(g.order) {
		m, ok := g.members[id]
		if !ok || m.joinParked || m.syncParked || now.Before(m.expires) {
			continue
		}
		fx = g.merge(fx, g.removeAndUpdate(now, m, wire.ErrUnknownMemberID))
	}
	if (g.state == CompletingRebalance || g.state == Stable) && !g.syncDeadline.IsZero() && !now.Before(g.syncDeadline) {
		g.syncDeadline = time.Time{}
		for _, id := range slices.Clone(g.order) {
			if m, ok := g.members[id]; ok && !m.synced {
				fx = g.merge(fx, g.removeAndUpdate(now, m, wire.ErrUnknownMemberID))
			}
		}
	}
	if g.state == PreparingRebalance && !g.joinDeadline.IsZero() && !now.Before(g.joinDeadline) {
		if g.initialDelay && g.newMemberAdded && g.initialRemaining > 0 {
			d := min(g.cfg.InitialRebalanceDelay, g.initialRemaining)
			g.initialRemaining -= d
			g.newMemberAdded = false
			g.joinDeadline = now.Add(d)
		} else {
			fx = g.merge(fx, g.completeJoin(now))
		}
	}
	fx = g.merge(fx, g.tryCompleteJoin(now))
	return fx
}

// NextDeadline is the earliest time at which Tick would change anything; zero = none.
func (g *Group) NextDeadline() time.Time {
	var t time.Time
	earlier := func(u time.Time) {
		if !u.IsZero() && (t.IsZero() || u.Before(t)) {
			t = u
		}
	}
	if g.state == Dead {
		return t
	}
	for _, exp := range g.pending {
		earlier(exp)
	}
	for _, m := range g.members {
		if !m.joinParked && !m.syncParked {
			earlier(m.expires)
		}
	}
	if g.state == PreparingRebalance {
		earlier(g.joinDeadline)
	}
	if g.state == CompletingRebalance || g.state == Stable {
		earlier(g.syncDeadline)
	}
	return t
}

// PersistFailed reports that the Persist of generation failed with err: the replies that
// waited for it are answered err. A static member's id replacement is undone; a failed
// SyncGroup snapshot sends the group back to PreparingRebalance.
func (g *Group) PersistFailed(now time.Time, generation int32, err wire.ErrorCode) Effects {
	var fx Effects
	rest := g.inflight[:0]
	var failed []inflight
	for _, f := range g.inflight {
		if f.generation == generation {
			failed = append(failed, f)
		} else {
			rest = append(rest, f)
		}
	}
	g.inflight = rest
	rebalance := false
	for _, f := range failed {
		for _, r := range f.replies {
			switch {
			case r.Join != nil:
				fx.Replies = append(fx.Replies, Reply{MemberID: r.MemberID, Join: errJoin(r.MemberID, err)})
			case r.Sync != nil:
				fx.Replies = append(fx.Replies, Reply{MemberID: r.MemberID, Sync: &SyncResponse{Err: err}})
			}
		}
		if f.static {
			if m, ok := g.members[f.newID]; ok && g.static[f.instanceID] == f.newID {
				g.replaceID(m, f.oldID)
				*m = f.oldMember
			}
		} else {
			rebalance = true
		}
	}
	if rebalance && generation == g.generation && (g.state == Stable || g.state == CompletingRebalance) {
		fx.Replies = append(fx.Replies, g.prepareRebalance(now)...)
		fx = g.merge(fx, g.tryCompleteJoin(now))
	}
	return fx
}

// PersistDone reports that the Persist of generation committed and its Replies were
// delivered. Optional: it only lets a later PersistFailed of that generation not answer
// them twice.
func (g *Group) PersistDone(generation int32) {
	g.inflight = slices.DeleteFunc(g.inflight, func(f inflight) bool { return f.generation == generation })
}

// CheckCommit is Kafka's validation of an OffsetCommit for the group.
func (g *Group) CheckCommit(memberID, instanceID string, generation int32) wire.ErrorCode {
	switch {
	case g.state == Dead:
		return wire.ErrCoordinatorNotAvailable
	case generation < 0 && g.state == Empty:
		return wire.NoError
	case g.state == CompletingRebalance:
		return wire.ErrRebalanceInProgress
	case g.fenced(memberID, instanceID):
		return wire.ErrFencedInstanceID
	}
	if _, ok := g.members[memberID]; !ok {
		return wire.ErrUnknownMemberID
	}
	if generation != g.generation {
		return wire.ErrIllegalGeneration
	}
	return wire.NoError
}

// Description is a group as DescribeGroups shows it.
type Description struct {
	State                  State
	ProtocolType, Protocol string
	Members                []MemberDescription
}

// MemberDescription is one member in a Description.
type MemberDescription struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Metadata, Assignment                       []byte
}

// Describe is the group as DescribeGroups shows it.
func (g *Group) Describe() Description {
	d := Description{State: g.state, ProtocolType: g.protocolType, Protocol: g.protocol}
	for _, id := range g.order {
		m := g.members[id]
		d.Members = append(d.Members, MemberDescription{MemberID: id, InstanceID: m.instanceID, ClientID: m.clientID,
			ClientHost: m.clientHost, Metadata: m.metadata(g.protocol), Assignment: m.assignment})
	}
	return d
}

func (g *Group) answerAll(err wire.ErrorCode) Effects {
	var fx Effects
	for _, id := range g.order {
		fx.Replies = append(fx.Replies, g.answerParked(g.members[id], err)...)
	}
	// Replies waiting for a Persist stay with the coordinator, which delivers them when
	// the write commits or answers them from PersistFailed.
	g.inflight = nil
	return fx
}

// MarkDead marks the group deleted: state Dead, no members, parked requests answered
// ErrCoordinatorNotAvailable. A Persist still in flight is forgotten: PersistFailed does
// nothing afterwards.
func (g *Group) MarkDead() Effects {
	fx := g.answerAll(wire.ErrCoordinatorNotAvailable)
	g.state = Dead
	g.members, g.order = map[string]*member{}, nil
	g.static, g.pending = map[string]string{}, map[string]time.Time{}
	g.leader, g.protocol, g.protocolType = "", "", ""
	return fx
}

// Unload answers every parked request ErrNotCoordinator: the coordinator lost the group's
// partition and drops the group.
func (g *Group) Unload() Effects {
	return g.answerAll(wire.ErrNotCoordinator)
}
