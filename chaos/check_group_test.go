package chaos

import (
	"reflect"
	"testing"
	"time"
)

// The group checks' tests: from small histories of one partition whose six records a group's
// consumers deliver and commit, the clean cases (a crash's uncommitted tail delivered again
// and counted as redelivered, a failed commit that may have been applied, an eager
// revoke-and-assign of the same consumer, another group's commits without deliveries), and
// each anomaly: an acknowledged, committed record never delivered (group-missed), a run that
// begins past the committed offset or skips within itself (group-gap), one that begins below
// it or goes back within itself (group-repeat), a delivery of a partition not owned
// (group-unowned), a delivered value that disagrees, and a final committed offset that went
// back or past the high watermark.

const grp = "g"

func at(t float64) int64 { return int64(t * float64(time.Second)) }

func assign(c int, tp TopicPartition, t float64) Event {
	return Event{T: at(t), Type: EvAssign, Group: grp, Consumer: c, Generation: 1, Topic: tp.Topic, Partition: tp.Partition}
}

func revoke(c int, tp TopicPartition, t float64) Event {
	return Event{T: at(t), Type: EvRevoke, Group: grp, Consumer: c, Generation: 1, Topic: tp.Topic, Partition: tp.Partition, Detail: "revoked"}
}

func crash(c int, t float64) Event {
	return Event{T: at(t), Type: EvConsumerCrash, Group: grp, Consumer: c, Detail: "hard"}
}

// dl is a delivery to consumer c of tp from offset first, one value per offset.
func dl(c int, tp TopicPartition, t float64, first int64, values ...string) Event {
	e := Event{T: at(t), Type: EvDeliver, Group: grp, Consumer: c, Generation: 1, Topic: tp.Topic, Partition: tp.Partition}
	for i, v := range values {
		e.Offsets = append(e.Offsets, first+int64(i))
		e.Values = append(e.Values, v)
	}
	return e
}

// gc is consumer c's commit of off to tp, called a millisecond before its outcome at t.
func gc(c int, tp TopicPartition, t float64, off int64, out Outcome) Event {
	return Event{T: at(t), Start: at(t - 0.001), Type: EvCommit, Group: grp, Consumer: c, Generation: 1,
		Topic: tp.Topic, Partition: tp.Partition, Offset: off, Outcome: out}
}

func gcommitted(tp TopicPartition, t float64, off int64) Event {
	return Event{T: at(t), Type: EvCommitted, Group: grp, Topic: tp.Topic, Partition: tp.Partition, Offset: off}
}

// sent is writer 0's values 0:0..0:5 acknowledged at offsets 0..5 of p0, and the final read.
func sent() []Event {
	var ev []Event
	for i := int64(0); i < 6; i++ {
		ev = append(ev, ok(p0, 0, i, i))
	}
	return append(ev, final(p0, "0:0", "0:1", "0:2", "0:3", "0:4", "0:5"))
}

// groupCounts are a Result's group counts and the run's failing count.
type groupCounts struct {
	Delivered, Redelivered, Crashes, Missed, Gaps, Repeats, Unowned, Inconsistent, CommitRegress, Count int
}

func groupCountsOf(r *Result) groupCounts {
	return groupCounts{r.GroupDelivered, r.Redelivered, r.GroupCrashes, r.GroupMissed, r.GroupGaps, r.GroupRepeats,
		r.GroupUnowned, r.Inconsistent, r.CommitRegress, r.Count()}
}

func TestCheckGroup(t *testing.T) {
	h6 := hw(map[TopicPartition]int64{p0: 6})
	// Consumer 1 takes p0, delivers 0..2, commits 3, delivers 3..4 and crashes before it
	// commits them; consumer 2 takes p0 and goes on from 3; the group's committed offset is 6.
	first := []Event{assign(1, p0, 10), dl(1, p0, 11, 0, "0:0", "0:1", "0:2"), gc(1, p0, 12, 3, OK)}
	crashed := with(first, dl(1, p0, 13, 3, "0:3", "0:4"), crash(1, 14))
	then := func(ev []Event, more ...Event) []Event {
		return with(with(sent(), ev...), append(more, gcommitted(p0, 30, 6))...)
	}
	cases := []struct {
		name   string
		events []Event
		final  FinalState
		want   groupCounts
		listed []Anomaly // Detail not compared
	}{
		{
			name:   "clean: the crash's uncommitted tail is delivered again",
			events: then(crashed, assign(2, p0, 20), dl(2, p0, 21, 3, "0:3", "0:4", "0:5"), gc(2, p0, 22, 6, OK), revoke(2, p0, 23)),
			want:   groupCounts{Delivered: 8, Redelivered: 2, Crashes: 1},
		},
		{
			name: "clean: a failed commit may have been applied, and the next owner begins there",
			events: then(with(first, dl(1, p0, 13, 3, "0:3", "0:4"), gc(1, p0, 13.5, 5, Failed), crash(1, 14)),
				assign(2, p0, 20), dl(2, p0, 21, 5, "0:5"), gc(2, p0, 22, 6, OK)),
			want: groupCounts{Delivered: 6, Crashes: 1},
		},
		{
			name: "clean: the same consumer revoked and assigned again (eager) goes on from its commit",
			events: then(first, revoke(1, p0, 13), assign(1, p0, 14), dl(1, p0, 15, 3, "0:3", "0:4", "0:5"),
				gc(1, p0, 16, 6, OK)),
			want: groupCounts{Delivered: 6},
		},
		{
			name:   "unowned: a delivery with no assignment",
			events: then(nil, dl(1, p0, 11, 0, "0:0", "0:1", "0:2", "0:3", "0:4", "0:5"), gc(1, p0, 12, 6, OK)),
			want:   groupCounts{Delivered: 6, Unowned: 1, Count: 1},
			listed: []Anomaly{{Kind: "group-unowned", TopicPartition: p0, Offset: 0, Value: "0:0"}},
		},
		{
			name:   "unowned: a delivery after the revocation",
			events: then(first, revoke(1, p0, 13), dl(1, p0, 14, 3, "0:3", "0:4", "0:5"), gc(1, p0, 15, 6, OK)),
			want:   groupCounts{Delivered: 6, Unowned: 1, Count: 1},
			listed: []Anomaly{{Kind: "group-unowned", TopicPartition: p0, Offset: 3, Value: "0:3"}},
		},
		{
			name:   "clean: another group's commits, without deliveries, ask for nothing",
			events: with(clean(), commit("app", p0, 5, OK), committed("app", p0, 5)),
			final:  hw(map[TopicPartition]int64{p0: 5}),
		},
		{
			name:   "gap and missed: the next owner begins past the commit",
			events: then(with(first, crash(1, 13)), assign(2, p0, 20), dl(2, p0, 21, 4, "0:4", "0:5"), gc(2, p0, 22, 6, OK)),
			want:   groupCounts{Delivered: 5, Crashes: 1, Missed: 1, Gaps: 1, Count: 2},
			listed: []Anomaly{
				{Kind: "group-missed", TopicPartition: p0, Offset: 3, Value: "0:3"},
				{Kind: "group-gap", TopicPartition: p0, Offset: 4},
			},
		},
		{
			name: "gap: a refused commit was not applied",
			events: then(with(first, dl(1, p0, 13, 3, "0:3", "0:4"), gc(1, p0, 13.5, 5, Refused), crash(1, 14)),
				assign(2, p0, 20), dl(2, p0, 21, 5, "0:5"), gc(2, p0, 22, 6, OK)),
			want:   groupCounts{Delivered: 6, Crashes: 1, Gaps: 1, Count: 1},
			listed: []Anomaly{{Kind: "group-gap", TopicPartition: p0, Offset: 5}},
		},
		{
			name:   "gap: the first run begins past the log start with nothing committed",
			events: then(nil, assign(1, p0, 10), dl(1, p0, 11, 1, "0:1", "0:2", "0:3", "0:4", "0:5"), gc(1, p0, 12, 6, OK)),
			want:   groupCounts{Delivered: 5, Missed: 1, Gaps: 1, Count: 2},
			listed: []Anomaly{
				{Kind: "group-missed", TopicPartition: p0, Offset: 0, Value: "0:0"},
				{Kind: "group-gap", TopicPartition: p0, Offset: 1},
			},
		},
		{
			name:   "gap: within a run",
			events: then(nil, assign(1, p0, 10), dl(1, p0, 11, 0, "0:0", "0:1"), dl(1, p0, 12, 3, "0:3", "0:4", "0:5"), gc(1, p0, 13, 6, OK)),
			want:   groupCounts{Delivered: 5, Missed: 1, Gaps: 1, Count: 2},
			listed: []Anomaly{
				{Kind: "group-missed", TopicPartition: p0, Offset: 2, Value: "0:2"},
				{Kind: "group-gap", TopicPartition: p0, Offset: 3, Value: "0:3"},
			},
		},
		{
			name:   "repeat: the next owner begins below the commit",
			events: then(crashed, assign(2, p0, 20), dl(2, p0, 21, 2, "0:2", "0:3", "0:4", "0:5"), gc(2, p0, 22, 6, OK)),
			want:   groupCounts{Delivered: 9, Redelivered: 3, Crashes: 1, Repeats: 1, Count: 1},
			listed: []Anomaly{{Kind: "group-repeat", TopicPartition: p0, Offset: 2}},
		},
		{
			name:   "repeat: within a run",
			events: then(first, dl(1, p0, 13, 2, "0:2", "0:3", "0:4", "0:5"), gc(1, p0, 14, 6, OK)),
			want:   groupCounts{Delivered: 7, Redelivered: 1, Repeats: 1, Count: 1},
			listed: []Anomaly{{Kind: "group-repeat", TopicPartition: p0, Offset: 2, Value: "0:2"}},
		},
		{
			name:   "inconsistent: a delivery's value differs from the log's",
			events: then(nil, assign(1, p0, 10), dl(1, p0, 11, 0, "0:0", "0:2", "0:2", "0:3", "0:4", "0:5"), gc(1, p0, 12, 6, OK)),
			want:   groupCounts{Delivered: 6, Inconsistent: 1, Count: 1},
			listed: []Anomaly{{Kind: "inconsistent", TopicPartition: p0, Offset: 1, Value: "0:2"}},
		},
		{
			name: "commit regression: the committed offset read back is below a commit",
			events: with(sent(), assign(1, p0, 10), dl(1, p0, 11, 0, "0:0", "0:1", "0:2", "0:3", "0:4", "0:5"),
				gc(1, p0, 12, 6, OK), gcommitted(p0, 30, 2)),
			want:   groupCounts{Delivered: 6, CommitRegress: 1, Count: 1},
			listed: []Anomaly{{Kind: "commit-regression", TopicPartition: p0, Offset: 2}},
		},
		{
			name: "gap: a committed offset past the high watermark",
			events: with(sent(), assign(1, p0, 10), dl(1, p0, 11, 0, "0:0", "0:1", "0:2", "0:3", "0:4", "0:5"),
				gc(1, p0, 12, 6, OK), gcommitted(p0, 30, 7)),
			want:   groupCounts{Delivered: 6, Gaps: 1, Count: 1},
			listed: []Anomaly{{Kind: "group-gap", TopicPartition: p0, Offset: 7}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := tc.final
			if fs.HighWatermarks == nil {
				fs = h6
			}
			r, err := Check(slice(tc.events), fs, CheckOptions{Idempotent: true, Ordered: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := groupCountsOf(r); got != tc.want {
				t.Errorf("counts %+v, want %+v", got, tc.want)
			}
			var got []Anomaly
			for _, a := range r.Anomalies {
				a.Detail = ""
				got = append(got, a)
			}
			if !reflect.DeepEqual(got, tc.listed) {
				t.Errorf("anomalies\n%+v\nwant\n%+v\n(all: %+v)", got, tc.listed, r.Anomalies)
			}
		})
	}
}

// TestCheckGroupBadDelivery: a delivery whose offsets and values differ in number is an error.
func TestCheckGroupBadDelivery(t *testing.T) {
	ev := []Event{{Type: EvDeliver, Group: grp, Consumer: 1, Topic: "t", Offsets: []int64{0, 1}, Values: []string{"0:0"}}}
	if _, err := Check(slice(ev), FinalState{}, CheckOptions{}); err == nil {
		t.Fatal("a delivery with 2 offsets and 1 value was taken")
	}
}
