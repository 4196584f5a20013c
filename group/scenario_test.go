package group

import (
	"bytes"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/scenario"
	"github.com/sluicemq/sluice/net/wire"
)

// TestScenarios runs the scripts in testdata/scenarios; `go test -run TestScenarios
// ./group -rewrite` writes the actual output back. Commands (key=value arguments):
//
//	config delay=D min=D max=D maxsize=N reject=ASSIGNMENT   a fresh group with this config
//	join [member=ID] [instance=I] [client=C] [type=consumer] [proto=NAME:META,...] [session=D] [rebalance=D]
//	     META is raw bytes, or a consumer subscription: topics=T+T[;owned=T/P+T/P][;rack=R]
//	sync member=ID [instance=I] gen=N [type=T] [protocol=P] [assign=ID:A,...]
//	heartbeat member=ID [instance=I] gen=N
//	leave [member=ID] [instance=I]
//	commit [member=ID] [instance=I] gen=N                  CheckCommit
//	tick +D                                                advance the clock by D and Tick
//	persist-failed gen=N [err=NAME]
//	restore                                                Restore from the last persisted record
//	describe | dead | unload
//
// Every command prints its result, then the replies and the persist it produced, then a
// state line. A command answered with an error (other than MEMBER_ID_REQUIRED and
// REBALANCE_IN_PROGRESS of a heartbeat) must leave the group unchanged; the driver checks.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/scenarios with the actual output")

func TestScenarios(t *testing.T) {
	scenario.Run(t, "testdata/scenarios/*.txt", *rewrite, func(t *testing.T, file string) func(string) []string {
		s := &driver{t: t, start: time.Unix(1_700_000_000, 0)}
		s.now = s.start
		s.configure(nil)
		return s.run
	})
}

type driver struct {
	t          *testing.T
	start, now time.Time
	cfg        Config
	g          *Group
	ids        map[string]int
	last       *Record // the last Persist
	committed  *Record // the one before it, which a failed last write falls back to
}

func (s *driver) configure(args map[string]string) {
	s.cfg = DefaultConfig()
	s.ids = map[string]int{}
	s.cfg.NewMemberID = func(client string) string {
		s.ids[client]++
		return fmt.Sprintf("%s-%d", client, s.ids[client])
	}
	for k, v := range args {
		switch k {
		case "delay":
			s.cfg.InitialRebalanceDelay = dur(s.t, v)
		case "min":
			s.cfg.MinSessionTimeout = dur(s.t, v)
		case "max":
			s.cfg.MaxSessionTimeout = dur(s.t, v)
		case "maxsize":
			s.cfg.MaxSize, _ = strconv.Atoi(v)
		case "reject":
			bad := v
			s.cfg.ValidateAssignment = func(a []byte) wire.ErrorCode {
				if string(a) == bad {
					return wire.ErrInvalidRequest
				}
				return wire.NoError
			}
		default:
			s.t.Fatalf("config: unknown %s", k)
		}
	}
	s.g = New("g", s.cfg, s.now)
}

func dur(t *testing.T, v string) time.Duration {
	d, err := time.ParseDuration(strings.TrimPrefix(v, "+"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func parseArgs(t *testing.T, fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("argument %q is not key=value", f)
		}
		m[k] = v
	}
	return m
}

func gen(t *testing.T, a map[string]string) int32 {
	n, err := strconv.Atoi(a["gen"])
	if err != nil {
		t.Fatalf("gen=%q: %v", a["gen"], err)
	}
	return int32(n)
}

func code(c wire.ErrorCode) string {
	if c == wire.NoError {
		return "ok"
	}
	return c.Name()
}

// fingerprint is everything an error must not change.
func (s *driver) fingerprint() string {
	g := s.g
	var b strings.Builder
	fmt.Fprintf(&b, "%v %d %s %s %s %x|", g.state, g.generation, g.protocolType, g.protocol, g.leader, g.Snapshot(s.start).Value)
	for _, id := range g.order {
		m := g.members[id]
		fmt.Fprintf(&b, "%s %v %v %v %v|", id, m.protocols, m.joinParked, m.syncParked, m.assignment)
	}
	fmt.Fprintf(&b, "%v %v %v %v", len(g.pending), g.joinDeadline, g.static, len(g.inflight))
	return b.String()
}

func (s *driver) run(cmd string) []string {
	fields := strings.Fields(cmd)
	name, a := fields[0], map[string]string{}
	if name != "tick" {
		a = parseArgs(s.t, fields[1:])
	}
	before := s.fingerprint()
	var out []string
	var fx Effects
	var errCode wire.ErrorCode
	mustKeep := true
	switch name {
	case "config":
		s.configure(a)
	case "join":
		req := JoinRequest{MemberID: a["member"], InstanceID: a["instance"], ClientID: a["client"], ClientHost: "/127.0.0.1",
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 45 * time.Second, ProtocolType: "consumer"}
		if req.ClientID == "" {
			req.ClientID = "c"
		}
		if v, ok := a["type"]; ok {
			req.ProtocolType = v
		}
		if v, ok := a["session"]; ok {
			req.SessionTimeout = dur(s.t, v)
		}
		if v, ok := a["rebalance"]; ok {
			req.RebalanceTimeout = dur(s.t, v)
		}
		proto := "range:m"
		if v, ok := a["proto"]; ok {
			proto = v
		}
		for _, p := range strings.Split(proto, ",") {
			if p == "" {
				continue
			}
			n, m, _ := strings.Cut(p, ":")
			req.Protocols = append(req.Protocols, Protocol{Name: n, Metadata: metadata(s.t, m)})
		}
		if v, ok := a["member-len"]; ok {
			n, _ := strconv.Atoi(v)
			req.MemberID = strings.Repeat("x", n)
		}
		id, resp, f := s.g.Join(s.now, req)
		fx = f
		if resp == nil {
			out = append(out, "join "+id+": parked")
		} else {
			out = append(out, "join "+formatJoin(id, resp))
			errCode = resp.Err
			mustKeep = resp.Err != wire.ErrMemberIDRequired
		}
	case "sync":
		req := SyncRequest{MemberID: a["member"], InstanceID: a["instance"], Generation: gen(s.t, a),
			ProtocolType: a["type"], Protocol: a["protocol"]}
		if v, ok := a["assign"]; ok {
			req.Assignments = map[string][]byte{}
			for _, p := range strings.Split(v, ",") {
				id, as, _ := strings.Cut(p, ":")
				req.Assignments[id] = []byte(as)
			}
		}
		resp, f := s.g.Sync(s.now, req)
		fx = f
		if resp == nil {
			out = append(out, "sync "+req.MemberID+": parked")
		} else {
			out = append(out, "sync "+formatSync(req.MemberID, resp))
			errCode = resp.Err
		}
	case "heartbeat":
		c, f := s.g.Heartbeat(s.now, a["member"], a["instance"], gen(s.t, a))
		fx, errCode = f, c
		mustKeep = c != wire.ErrRebalanceInProgress
		out = append(out, "heartbeat "+a["member"]+": "+code(c))
	case "leave":
		c, f := s.g.Leave(s.now, a["member"], a["instance"])
		fx, errCode = f, c
		out = append(out, "leave: "+code(c))
	case "commit":
		c := s.g.CheckCommit(a["member"], a["instance"], gen(s.t, a))
		out = append(out, "commit: "+code(c))
	case "tick":
		s.now = s.now.Add(dur(s.t, fields[1]))
		fx = s.g.Tick(s.now)
	case "persist-failed":
		c := wire.ErrNotEnoughReplicas
		if v, ok := a["err"]; ok {
			c = errByName(s.t, v)
		}
		fx = s.g.PersistFailed(s.now, gen(s.t, a), c)
		s.last = s.committed
	case "restore":
		var v []byte
		if s.last != nil {
			v = s.last.Value
		}
		g, err := Restore("g", s.cfg, v, s.now)
		if err != nil {
			out = append(out, "restore: "+err.Error())
		} else {
			s.g = g
		}
	case "describe":
		d := s.g.Describe()
		out = append(out, fmt.Sprintf("describe: %v type=%s protocol=%s", d.State, d.ProtocolType, d.Protocol))
		for _, m := range d.Members {
			out = append(out, fmt.Sprintf("  %s instance=%s client=%s host=%s metadata=%s assignment=%s",
				m.MemberID, m.InstanceID, m.ClientID, m.ClientHost, formatMetadata(m.Metadata), m.Assignment))
		}
	case "dead":
		fx = s.g.MarkDead()
	case "unload":
		fx = s.g.Unload()
	default:
		s.t.Fatalf("unknown command %q", cmd)
	}
	if errCode != wire.NoError && mustKeep {
		if after := s.fingerprint(); after != before {
			s.t.Errorf("%s: error %s changed the group:\nbefore %s\nafter  %s", cmd, code(errCode), before, after)
		}
	}
	for _, r := range fx.Replies {
		switch {
		case r.Join != nil:
			out = append(out, "  reply join "+formatJoin(r.MemberID, r.Join))
		case r.Sync != nil:
			out = append(out, "  reply sync "+formatSync(r.MemberID, r.Sync))
		}
	}
	if fx.Persist != nil {
		s.committed, s.last = s.last, fx.Persist
		s.checkRecord(fx.Persist)
		out = append(out, "  persist "+formatRecord(s.t, fx.Persist))
	}
	return append(out, s.stateLine())
}

// checkRecord checks that a persisted record restores to the group it came from.
func (s *driver) checkRecord(r *Record) {
	if g, ok, err := DecodeKey(r.Key()); err != nil || !ok || g != r.Group {
		s.t.Errorf("key of %s decodes to %q %v %v", r.Group, g, ok, err)
	}
	g, err := Restore(r.Group, s.cfg, r.Value, s.now)
	if err != nil {
		s.t.Fatalf("restore of a snapshot: %v", err)
	}
	if !bytes.Equal(g.Snapshot(s.now).Value[:0], nil) && g.generation != r.Generation {
		s.t.Errorf("restored generation %d, record %d", g.generation, r.Generation)
	}
}

func formatRecord(t *testing.T, r *Record) string {
	g, err := Restore(r.Group, Config{}, r.Value, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var ms []string
	for _, id := range g.order {
		m := g.members[id]
		s := id
		if m.instanceID != "" {
			s += "(" + m.instanceID + ")"
		}
		ms = append(ms, s+"="+string(m.assignment))
	}
	return fmt.Sprintf("gen=%d type=%s protocol=%s leader=%s members=[%s]", g.generation, g.protocolType, g.protocol, g.leader, strings.Join(ms, " "))
}

// short abbreviates the oversized ids of the bad-input script.
func short(id string) string {
	if len(id) > 40 {
		return fmt.Sprintf("%s...(%d bytes)", id[:4], len(id))
	}
	return id
}

func formatJoin(id string, r *JoinResponse) string {
	if r.Err != wire.NoError {
		return short(id) + ": " + code(r.Err) + " member=" + short(r.MemberID)
	}
	s := fmt.Sprintf("%s: ok gen=%d protocol=%s leader=%s", id, r.Generation, r.Protocol, r.Leader)
	if r.SkipAssignment {
		s += " skip-assignment"
	}
	if r.Members != nil {
		var ms []string
		for _, m := range r.Members {
			ms = append(ms, m.MemberID+":"+formatMetadata(m.Metadata))
		}
		s += " members=" + strings.Join(ms, ",")
	}
	return s
}

func formatSync(id string, r *SyncResponse) string {
	if r.Err != wire.NoError {
		return id + ": " + code(r.Err)
	}
	return fmt.Sprintf("%s: ok protocol=%s assignment=%s", id, r.Protocol, r.Assignment)
}

func (s *driver) stateLine() string {
	g := s.g
	var pend []string
	for id := range g.pending {
		pend = append(pend, id)
	}
	sort.Strings(pend)
	next := "none"
	if d := g.NextDeadline(); !d.IsZero() {
		next = "+" + d.Sub(s.now).String()
	}
	l := fmt.Sprintf("state=%v gen=%d protocol=%s leader=%s members=%s", g.state, g.generation, g.protocol, g.leader, strings.Join(g.order, ","))
	if len(pend) > 0 {
		l += " pending=" + strings.Join(pend, ",")
	}
	return l + " next=" + next
}

func errByName(t *testing.T, name string) wire.ErrorCode {
	for c := wire.ErrorCode(-1); c < 200; c++ {
		if c.Name() == name {
			return c
		}
	}
	t.Fatalf("no error code %s", name)
	return 0
}

// metadata is a join's protocol metadata: "topics=a+b;owned=a/0+b/1;rack=r" encodes a
// ConsumerSubscription v3 (generation 1 when it owns partitions), anything else is the bytes.
func metadata(t *testing.T, m string) []byte {
	if !strings.HasPrefix(m, "topics=") {
		return []byte(m)
	}
	sub := wire.ConsumerSubscription{Version: 3, GenerationID: -1}
	for _, f := range strings.Split(m, ";") {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "topics":
			sub.Topics = strings.Split(v, "+")
		case "owned":
			sub.GenerationID = 1
			for _, tp := range strings.Split(v, "+") {
				topic, p, _ := strings.Cut(tp, "/")
				n, err := strconv.Atoi(p)
				if err != nil {
					t.Fatalf("owned %q: %v", tp, err)
				}
				if k := len(sub.OwnedPartitions); k > 0 && sub.OwnedPartitions[k-1].Topic == topic {
					sub.OwnedPartitions[k-1].Partitions = append(sub.OwnedPartitions[k-1].Partitions, int32(n))
				} else {
					sub.OwnedPartitions = append(sub.OwnedPartitions, wire.ConsumerTopicPartitions{Topic: topic, Partitions: []int32{int32(n)}})
				}
			}
		case "rack":
			sub.RackID = &v
		default:
			t.Fatalf("metadata %q: unknown field %s", m, k)
		}
	}
	return sub.AppendTo(nil)
}

// formatMetadata prints metadata in the syntax metadata reads.
func formatMetadata(b []byte) string {
	var sub wire.ConsumerSubscription
	if sub.ReadFrom(b) != nil || sub.Version != 3 || !bytes.Equal(sub.AppendTo(nil), b) {
		return string(b)
	}
	s := "topics=" + strings.Join(sub.Topics, "+")
	var owned []string
	for _, tp := range sub.OwnedPartitions {
		for _, p := range tp.Partitions {
			owned = append(owned, fmt.Sprintf("%s/%d", tp.Topic, p))
		}
	}
	if len(owned) > 0 {
		s += ";owned=" + strings.Join(owned, "+")
	}
	if sub.RackID != nil {
		s += ";rack=" + *sub.RackID
	}
	return s
}
