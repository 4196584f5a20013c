package client_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// TestGroupFencedInstance: a second consumer with the same group.instance.id takes the first
// one's place (KIP-345: the coordinator gives the instance a new member id, with no
// rebalance); the first, still polling, is fenced: its listener is told its partitions are
// lost, it owns none, and Poll returns an error wrapping FENCED_INSTANCE_ID. The second owns
// them all.
func TestGroupFencedInstance(t *testing.T) {
	f := newGroupFixture(t)
	f.createTopic("fenced", 2)
	cfg := client.ConsumerConfig{GroupInstanceID: "same"}
	first := f.newMember("first", "fenced", "fenced", cfg)
	waitFor(t, 30*time.Second, func() string { return "first not assigned:" + describe([]*member{first}) }, func() bool {
		return len(first.c.Assignment()) == 2
	})
	owned := first.c.Assignment()
	second := f.newMember("second", "fenced", "fenced", cfg)
	both := []*member{first, second}
	waitFor(t, 30*time.Second, func() string { return "first not fenced:" + describe(both) }, func() bool {
		_, _, err := first.snapshot()
		return err != nil
	})
	if _, _, err := first.snapshot(); !errors.Is(err, wire.ErrFencedInstanceID) {
		t.Fatalf("the fenced member's Poll: %v, want FENCED_INSTANCE_ID", err)
	}
	waitFor(t, 30*time.Second, func() string { return "second not assigned:" + describe(both) }, func() bool {
		return len(second.c.Assignment()) == 2
	})
	ev, rev, _ := first.snapshot()
	var lost []string
	for _, e := range ev {
		if tp, ok := strings.CutPrefix(e, "lost "); ok {
			lost = append(lost, tp)
		}
	}
	var want []string
	for _, tp := range owned {
		want = append(want, tp.String())
	}
	slices.Sort(lost)
	slices.Sort(want)
	if !slices.Equal(lost, want) || len(rev) != 0 {
		t.Errorf("fenced member's listener: lost %v, revoked %v; want lost %v and nothing revoked (events %v)", lost, rev, want, ev)
	}
	if a := first.c.Assignment(); len(a) != 0 {
		t.Errorf("fenced member still owns %v", a)
	}
}
