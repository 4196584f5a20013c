package client_test

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
)

// BenchmarkGroupRebalance measures the rebalance time: ten consumers join a group of a
// 20-partition topic one by one, then one leaves, with eager (range) and with cooperative
// (cooperative-sticky) assignment, while a producer appends a record to every partition every
// 20 ms. Each step is timed from the Subscribe (or the Close) until every partition is owned
// again, disjointly, evenly, by members of one generation. Heartbeats run every 100 ms, so a
// member learns of a rebalance within 100 ms (a cooperative rebalance that moves partitions
// takes two rounds, and so up to two heartbeats).
//
// Reported: ms/join (the median of the ten joins), ms/join-max, ms/leave, and stall-ms: the
// longest time any member that was in the group before a step and stays in it went without
// Poll returning records during the step (the median over the steps, and stall-ms-max the
// worst). Eager members give everything up, so their stall is the rebalance; cooperative
// members keep consuming what they keep. Run with -benchtime=1x.
func BenchmarkGroupRebalance(b *testing.B) {
	for _, tc := range []struct {
		name      string
		assignors []string
	}{{"eager", []string{"range"}}, {"cooperative", []string{"cooperative-sticky"}}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				rebalanceSteps(b, tc.assignors)
			}
		})
	}
}

func rebalanceSteps(b *testing.B, assignors []string) {
	const partitions, members = 20, 10
	f := newGroupFixture(b)
	f.createTopic("t", partitions)
	ctx, cancel := context.WithCancel(f.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // bounded by the fixture's deadline
		defer wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for ctx.Err() == nil {
			for p := range int32(partitions) {
				f.produceValues("t", p, "v")
			}
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	cfg := client.ConsumerConfig{Assignors: assignors}
	var ms []*member
	var joins, stalls []time.Duration
	// step runs act, which changes the group to group, and waits for the partitions to be
	// owned again; keepers are the members there before and after.
	step := func(what string, keepers []*member, act func() []*member) time.Duration {
		start := time.Now()
		group := act()
		waitFor(b, 60*time.Second, func() string { return what + ": not balanced:" + describe(group) }, func() bool {
			return balanced(group, "t", partitions)
		})
		end := time.Now()
		stalls = append(stalls, longestStall(keepers, start, end))
		return end.Sub(start)
	}
	for i := range members {
		joins = append(joins, step("join "+strconv.Itoa(i), slices.Clone(ms), func() []*member {
			ms = append(ms, f.newMember("c"+strconv.Itoa(i), "g", "t", cfg))
			return ms
		}))
	}
	rest := slices.Delete(slices.Clone(ms), 4, 5)
	leave := step("leave", rest, func() []*member {
		ms[4].close(b)
		return rest
	})
	slices.Sort(joins)
	sortedStalls := slices.Clone(stalls[1:]) // the first join has no keepers
	slices.Sort(sortedStalls)
	b.ReportMetric(ms1(joins[len(joins)/2]), "ms/join")
	b.ReportMetric(ms1(joins[len(joins)-1]), "ms/join-max")
	b.ReportMetric(ms1(leave), "ms/leave")
	b.ReportMetric(ms1(sortedStalls[len(sortedStalls)/2]), "stall-ms")
	b.ReportMetric(ms1(sortedStalls[len(sortedStalls)-1]), "stall-ms-max")
}

func ms1(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// balanced reports whether every partition of topic is owned by exactly one of ms, the
// members own n/len(ms) or one more each, and they are all in one generation.
func balanced(ms []*member, topic string, n int) bool {
	owner := map[int32]bool{}
	gen := int32(-2)
	for _, m := range ms {
		a := m.c.Assignment()
		if len(a) < n/len(ms) || len(a) > (n+len(ms)-1)/len(ms) {
			return false
		}
		g := m.c.GroupMetadata().Generation
		if gen != -2 && g != gen {
			return false
		}
		gen = g
		for _, tp := range a {
			if tp.Topic != topic || owner[tp.Partition] {
				return false
			}
			owner[tp.Partition] = true
		}
	}
	return len(owner) == n
}

// longestStall is the longest time within [start, end] that any of ms went without Poll
// returning records.
func longestStall(ms []*member, start, end time.Time) time.Duration {
	var worst time.Duration
	for _, m := range ms {
		m.mu.Lock()
		polls := m.polls
		m.mu.Unlock()
		i := sort.Search(len(polls), func(i int) bool { return !polls[i].Before(start) })
		last := start
		for ; i < len(polls) && polls[i].Before(end); i++ {
			worst = max(worst, polls[i].Sub(last))
			last = polls[i]
		}
		worst = max(worst, end.Sub(last))
	}
	return worst
}
