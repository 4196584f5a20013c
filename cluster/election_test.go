package cluster

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestElectLeader(t *testing.T) {
	in := func(ids ...int32) func(int32) bool { return func(id int32) bool { return slices.Contains(ids, id) } }
	cases := []struct {
		name        string
		ar, isr     []int32
		alive       func(int32) bool
		unclean     bool
		want        int32
		wantUnclean bool
	}{
		// The seed's rule: ar [1,0,2], isr [1,0,2] tries 1, then 0, then 2.
		{"seed: all alive", []int32{1, 0, 2}, []int32{1, 0, 2}, in(0, 1, 2), false, 1, false},
		{"seed: 1 down", []int32{1, 0, 2}, []int32{1, 0, 2}, in(0, 2), false, 0, false},
		{"seed: 1 and 0 down", []int32{1, 0, 2}, []int32{1, 0, 2}, in(2), false, 2, false},
		{"seed: all down", []int32{1, 0, 2}, []int32{1, 0, 2}, in(), false, NoLeader, false},
		// AR order, not ISR order, decides.
		{"AR order over ISR order", []int32{1, 0, 2}, []int32{2, 0, 1}, in(0, 1, 2), false, 1, false},
		{"alive but outside the ISR", []int32{1, 0, 2}, []int32{2}, in(0, 1), false, NoLeader, false},
		{"unclean: first alive outside", []int32{1, 0, 2}, []int32{2}, in(0, 1), true, 1, true},
		{"unclean not needed", []int32{1, 0, 2}, []int32{0, 2}, in(0, 1, 2), true, 0, false},
		{"unclean, nobody alive", []int32{1, 0}, []int32{1}, in(), true, NoLeader, false},
		{"ISR member not a replica is ignored", []int32{1, 0}, []int32{7}, in(7), false, NoLeader, false},
		{"empty", nil, nil, in(0), true, NoLeader, false},
	}
	for _, c := range cases {
		got, unclean := ElectLeader(c.ar, c.isr, c.alive, c.unclean)
		if got != c.want || unclean != c.wantUnclean {
			t.Errorf("%s: ElectLeader(%v, %v, unclean=%v) = %d, %v; want %d, %v", c.name, c.ar, c.isr, c.unclean, got, unclean, c.want, c.wantUnclean)
		}
	}
}

// TestFenceUnfenceLastISRMember: fencing the last ISR member leaves the
// partition without a leader but keeps the member in the ISR, so that its
// return elects it cleanly; a broker outside the ISR coming back does not.
func TestFenceUnfenceLastISRMember(t *testing.T) {
	m := newMachine(t)
	epochs := map[int32]int64{}
	for _, id := range []int32{0, 1} {
		epochs[id] = m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: id, Host: "h", Port: 9092, Incarnation: "i"}}).BrokerEpoch
		m.ok(&unfenceBrokerCmd{brokerEpochCmd{ID: id, Epoch: epochs[id]}})
	}
	m.ok(&createTopicCmd{TopicSpec: TopicSpec{Name: "t", Assignment: [][]int32{{0, 1}}}, ID: idOf(1)})
	part := func() PartitionMeta { tp, _ := m.md.Topic("t"); return tp.Partitions[0] }

	res := m.ok(&fenceBrokerCmd{brokerEpochCmd{ID: 0, Epoch: epochs[0]}})
	if p := part(); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) || p.LeaderEpoch != 1 || p.PartitionEpoch != 1 {
		t.Fatalf("after fencing the leader: %+v", p)
	}
	if len(res.Elections) != 1 || res.Elections[0] != (Election{Topic: "t", Partition: 0, From: 0, To: 1, LeaderEpoch: 1, PartitionEpoch: 1}) {
		t.Fatalf("elections %+v", res.Elections)
	}
	m.ok(&fenceBrokerCmd{brokerEpochCmd{ID: 1, Epoch: epochs[1]}})
	if p := part(); p.Leader != NoLeader || !slices.Equal(p.ISR, []int32{1}) || p.LeaderEpoch != 2 || p.PartitionEpoch != 2 {
		t.Fatalf("after fencing the last ISR member: %+v", p)
	}
	// A fence again (a retry) changes nothing; a stale one is refused.
	v := m.md.Version()
	m.ok(&fenceBrokerCmd{brokerEpochCmd{ID: 1, Epoch: epochs[1]}})
	m.fails(&fenceBrokerCmd{brokerEpochCmd{ID: 1, Epoch: epochs[1] + 1}}, ErrStaleBrokerEpoch)
	m.fails(&fenceBrokerCmd{brokerEpochCmd{ID: 9, Epoch: 1}}, ErrUnknownBroker)
	if m.md.Version() != v {
		t.Fatal("a repeated fence changed the state")
	}

	m.ok(&unfenceBrokerCmd{brokerEpochCmd{ID: 0, Epoch: epochs[0]}})
	if p := part(); p.Leader != NoLeader {
		t.Fatalf("broker 0, outside the ISR, was elected: %+v", p)
	}
	res = m.ok(&unfenceBrokerCmd{brokerEpochCmd{ID: 1, Epoch: epochs[1]}})
	if p := part(); p.Leader != 1 || p.LeaderEpoch != 3 || p.PartitionEpoch != 3 || len(res.Elections) != 1 {
		t.Fatalf("after the last ISR member returned: %+v, %+v", p, res.Elections)
	}
}

// TestRegistrationEpochs: every registration gets the raft index as its
// epoch and starts fenced, taking the leadership of the partitions the
// previous run led; a registration from an old log (no incarnation) keeps
// the broker alive, as it was when written.
func TestRegistrationEpochs(t *testing.T) {
	m := newMachine(t, 0) // legacy: alive
	if b, _ := m.md.Broker(0); b.State() != BrokerAlive || b.Epoch != 0 {
		t.Fatalf("legacy registration: %+v", b)
	}
	m.ok(create("t", 1, 1))
	res := m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 0, Host: "h", Port: 1, Incarnation: "a"}})
	b, _ := m.md.Broker(0)
	if res.BrokerEpoch != 3 || b.Epoch != 3 || b.State() != BrokerFenced || b.Incarnation != "a" {
		t.Fatalf("registration: epoch %d, %+v", res.BrokerEpoch, b)
	}
	if tp, _ := m.md.Topic("t"); tp.Partitions[0].Leader != NoLeader {
		t.Fatalf("the restarted broker still leads: %+v", tp.Partitions[0])
	}
	// The same incarnation again (a retry) still gets a new epoch.
	res = m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 0, Host: "h", Port: 1, Incarnation: "a"}})
	if res.BrokerEpoch != 4 {
		t.Fatalf("re-registration epoch %d", res.BrokerEpoch)
	}
	m.fails(&unfenceBrokerCmd{brokerEpochCmd{ID: 0, Epoch: 3}}, ErrStaleBrokerEpoch)
	m.ok(&unfenceBrokerCmd{brokerEpochCmd{ID: 0, Epoch: 4}})
	if tp, _ := m.md.Topic("t"); tp.Partitions[0].Leader != 0 {
		t.Fatalf("unfenced broker not elected: %+v", tp.Partitions[0])
	}
	m.fails(&registerBrokerCmd{Broker: BrokerInfo{ID: 0, Host: "h", Port: 1, Incarnation: string(make([]byte, 65))}}, ErrInvalidBroker)
	m.fails(&controlledShutdownCmd{brokerEpochCmd{ID: 0, Epoch: 3}}, ErrStaleBrokerEpoch)
}

func TestBrokerStateString(t *testing.T) {
	for s, want := range map[BrokerState]string{BrokerAlive: "alive", BrokerFenced: "fenced", BrokerShuttingDown: "shutting down"} {
		if s.String() != want {
			t.Errorf("%d: %q", s, s.String())
		}
	}
	if (BrokerInfo{Fenced: true, ShuttingDown: true}).State() != BrokerFenced {
		t.Error("fenced and shutting down is not fenced")
	}
}

func TestLiveBrokers(t *testing.T) {
	m := newMachine(t, 3, 1, 2)
	m.ok(&fenceBrokerCmd{brokerEpochCmd{ID: 2, Epoch: 0}})
	m.ok(&controlledShutdownCmd{brokerEpochCmd{ID: 3, Epoch: 0}})
	if got := m.md.LiveBrokers(); !slices.Equal(got, []int32{1}) {
		t.Fatalf("LiveBrokers() = %v", got)
	}
}

// TestElectionsLogged: the fsm logs each election Apply makes, an unclean
// one at Warn with the partition and the epochs.
func TestElectionsLogged(t *testing.T) {
	var buf strings.Builder
	f := newFSM(func() {})
	f.log = slog.New(slog.NewTextHandler(&buf, nil))
	f.logElections([]Election{
		{Topic: "a", Partition: 1, From: 0, To: 2, LeaderEpoch: 3, PartitionEpoch: 4},
		{Topic: "b", Partition: 0, From: 1, To: 0, LeaderEpoch: 5, PartitionEpoch: 6, Unclean: true},
	}, 42)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 ||
		!strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "topic=a partition=1 from=0 to=2 leader_epoch=3 partition_epoch=4") ||
		!strings.Contains(lines[1], "level=WARN") || !strings.Contains(lines[1], "unclean") ||
		!strings.Contains(lines[1], "topic=b partition=0 from=1 to=0 leader_epoch=5 partition_epoch=6 index=42") {
		t.Fatalf("log:\n%s", buf.String())
	}
}
