package client_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
)

// commitOnRevoke is Kafka's manual-commit pattern: the listener commits the consumed positions
// in OnPartitionsRevoked (it runs inside Poll, so CommitSync may be called there).
type commitOnRevoke struct {
	c *client.Consumer // set by newMember before the consumer polls

	mu   sync.Mutex
	errs []error
}

func (l *commitOnRevoke) bind(c *client.Consumer) { l.c = c }

func (l *commitOnRevoke) OnPartitionsRevoked(ctx context.Context, _ []client.TopicPartition) {
	if err := l.c.CommitSync(ctx); err != nil {
		l.mu.Lock()
		l.errs = append(l.errs, err)
		l.mu.Unlock()
	}
}

func (l *commitOnRevoke) OnPartitionsAssigned(context.Context, []client.TopicPartition) {}
func (l *commitOnRevoke) OnPartitionsLost(context.Context, []client.TopicPartition)     {}

// TestGroupListenerCommitsOnRevoke: with enable.auto.commit off, a listener that commits in
// OnPartitionsRevoked hands every partition over at the position its owner reached. Members
// join one by one, each join moving partitions that were partly read, and records are produced
// between the joins: every record is read exactly once by the group (a missing commit would
// restart a moved partition from auto.offset.reset earliest, a repeat; a commit past the
// consumed position would skip records, a gap), and no commit fails.
func TestGroupListenerCommitsOnRevoke(t *testing.T) {
	f := newGroupFixture(t)
	f.createTopic("handover", 6)
	off := new(bool)
	var ms []*member
	var ls []*commitOnRevoke
	readOnce := func(upTo int64) func() bool {
		return func() bool {
			for p := range int32(6) {
				tp := client.TopicPartition{Topic: "handover", Partition: p}
				var all []int64
				for _, m := range ms {
					m.mu.Lock()
					all = append(all, m.recs[tp]...)
					m.mu.Unlock()
				}
				slices.Sort(all)
				if !slices.Equal(all, consumerOffsetRange(0, upTo)) {
					return false
				}
			}
			return true
		}
	}
	sizes := [][]int{{6}, {3, 3}, {2, 2, 2}}
	for i, name := range []string{"a", "b", "c"} {
		l := &commitOnRevoke{}
		ls = append(ls, l)
		ms = append(ms, f.newMember(name, "handover", "handover", client.ConsumerConfig{EnableAutoCommit: off, RebalanceListener: l}))
		waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("no %v split:%s", sizes[i], describe(ms)) }, func() bool {
			return split(ms, "handover", 6, sizes[i]...)
		})
		for p := range int32(6) {
			f.produceValues("handover", p, consumerValues(5, name)...)
		}
		upTo := int64(5 * (i + 1))
		waitFor(t, 20*time.Second, func() string {
			return fmt.Sprintf("records 0..%d of every partition not read exactly once:%s", upTo-1, describe(ms))
		}, readOnce(upTo))
	}
	for i, l := range ls {
		l.mu.Lock()
		if len(l.errs) > 0 {
			t.Errorf("%s: commit on revocation failed: %v", ms[i].name, l.errs)
		}
		l.mu.Unlock()
	}
}
