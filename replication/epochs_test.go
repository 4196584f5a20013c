package replication

import (
	"slices"
	"testing"

	"github.com/sluicemq/sluice/batch"
)

// The leader-epoch cache follows Kafka's LeaderEpochFileCache: these tables pin endOffsetFor,
// assign, truncateFromEnd and truncateFromStart case by case, and the follower's truncation
// rules (EpochAnswered, OutOfRange) that build on them.

func entries(pairs ...int64) epochCache {
	var c epochCache
	for i := 0; i+1 < len(pairs); i += 2 {
		c = append(c, EpochEntry{Epoch: int32(pairs[i]), StartOffset: batch.Offset(pairs[i+1])})
	}
	return c
}

func TestEndOffsetFor(t *testing.T) {
	cache := entries(2, 10, 4, 20, 7, 30) // log end 40
	for _, tc := range []struct {
		name      string
		cache     epochCache
		epoch     int32
		wantEpoch int32
		wantEnd   batch.Offset
	}{
		{"latest epoch ends at the log end", cache, 7, 7, 40},
		{"older epoch ends where the next starts", cache, 4, 4, 30},
		{"first epoch", cache, 2, 2, 20},
		{"between two epochs: the floor's epoch, the next's start", cache, 5, 4, 30},
		{"between the first two", cache, 3, 2, 20},
		{"below every entry: the epoch asked, the first start", cache, 1, 1, 10},
		{"above the latest: undefined", cache, 9, UndefinedEpoch, UndefinedOffset},
		{"undefined asked", cache, UndefinedEpoch, UndefinedEpoch, UndefinedOffset},
		{"empty cache", nil, 3, UndefinedEpoch, UndefinedOffset},
		{"one entry, asked", entries(0, 0), 0, 0, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, o := tc.cache.endOffsetFor(tc.epoch, 40)
			if e != tc.wantEpoch || o != tc.wantEnd {
				t.Errorf("endOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.epoch, e, o, tc.wantEpoch, tc.wantEnd)
			}
		})
	}
}

func TestEpochCacheAssign(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cache   epochCache
		add     EpochEntry
		want    epochCache
		changed bool
	}{
		{"to an empty cache", nil, EpochEntry{3, 5}, entries(3, 5), true},
		{"a later epoch", entries(1, 0), EpochEntry{3, 5}, entries(1, 0, 3, 5), true},
		{"the same epoch again", entries(1, 0, 3, 5), EpochEntry{3, 9}, entries(1, 0, 3, 5), false},
		{"an older epoch", entries(1, 0, 3, 5), EpochEntry{2, 9}, entries(1, 0, 3, 5), false},
		{"an empty epoch is replaced", entries(1, 0, 3, 5), EpochEntry{4, 5}, entries(1, 0, 4, 5), true},
		{"an undefined epoch", entries(1, 0), EpochEntry{UndefinedEpoch, 5}, entries(1, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := slices.Clone(tc.cache)
			if changed := c.assign(tc.add); changed != tc.changed || !slices.Equal(c, tc.want) {
				t.Errorf("assign(%v) = %v (changed %v), want %v (changed %v)", tc.add, c, changed, tc.want, tc.changed)
			}
		})
	}
}

func TestEpochCacheTruncate(t *testing.T) {
	cache := entries(2, 10, 4, 20, 7, 30)
	for _, tc := range []struct {
		name    string
		end     bool // truncateFromEnd, else truncateFromStart
		at      batch.Offset
		want    epochCache
		changed bool
	}{
		{"end inside the latest epoch keeps it", true, 35, cache, false},
		{"end at an epoch's start drops it", true, 30, entries(2, 10, 4, 20), true},
		{"end inside an older epoch drops the later ones", true, 25, entries(2, 10, 4, 20), true},
		{"end at the first start empties the cache", true, 10, nil, true},
		{"end past the log keeps all", true, 50, cache, false},
		{"start below the first entry changes nothing", false, 5, cache, false},
		{"start at the first entry changes nothing", false, 10, cache, false},
		{"start inside the first epoch lifts it", false, 15, entries(2, 15, 4, 20, 7, 30), true},
		{"start at an epoch's start drops the ones below", false, 20, entries(4, 20, 7, 30), true},
		{"start inside a later epoch drops and lifts", false, 33, entries(7, 33), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := slices.Clone(cache)
			var changed bool
			if tc.end {
				changed = c.truncateFromEnd(tc.at)
			} else {
				changed = c.truncateFromStart(tc.at)
			}
			if changed != tc.changed || !slices.Equal(c, tc.want) {
				t.Errorf("got %v (changed %v), want %v (changed %v)", c, changed, tc.want, tc.changed)
			}
		})
	}
}

// TestFollowerTruncation pins the follower's rules for the leader's OffsetForLeaderEpoch
// answer (KIP-279): what it truncates to, or which epoch it asks for next. The local log is
// epochs 1@0 3@10 5@20, log end 30, log start 0.
func TestFollowerTruncation(t *testing.T) {
	type answer struct {
		leaderEpoch int32
		end         batch.Offset
	}
	for _, tc := range []struct {
		name     string
		answers  []answer // in turn, each for the plan's epoch
		wantTo   batch.Offset
		wantAsks []int32 // the epochs asked, in turn
	}{
		{"leader holds the epoch and more", []answer{{5, 40}}, 30, []int32{5}},
		{"leader holds the epoch, ending earlier", []answer{{5, 25}}, 25, []int32{5}},
		{"leader ends the epoch below its local start", []answer{{5, 15}}, 15, []int32{5}},
		{"leader's older epoch that the log holds: the smaller end", []answer{{3, 18}}, 18, []int32{5}},
		{"leader's older epoch that the log holds: the local end", []answer{{3, 25}}, 20, []int32{5}},
		{"leader's epoch the log lacks: ask below it", []answer{{4, 22}, {3, 22}}, 20, []int32{5, 3}},
		{"twice down to the first epoch", []answer{{4, 22}, {2, 8}, {1, 8}}, 8, []int32{5, 3, 1}},
		{"leader's epoch below every local one", []answer{{0, 5}}, 0, []int32{5}},
		{"leader holds nothing: to the log start", []answer{{UndefinedEpoch, UndefinedOffset}}, 0, []int32{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(Config{ReplicaID: 2, MinInsync: 1}, LogState{EndOffset: 30, DurableOffset: 30, Epochs: entries(1, 0, 3, 10, 5, 20)})
			r.BecomeFollower(FollowerUpdate{Leader: 1, LeaderEpoch: 6, Replicas: []int32{1, 2}}, testNow)
			r.Ready()
			var asks []int32
			var rd Ready
			for _, a := range tc.answers {
				p := r.NextFetch()
				if p.Kind != FetchEpochQuery {
					t.Fatalf("plan %+v, want an epoch query", p)
				}
				asks = append(asks, p.Epoch)
				r.EpochAnswered(a.leaderEpoch, p.Epoch, a.end)
				rd = r.Ready()
			}
			if !slices.Equal(asks, tc.wantAsks) {
				t.Errorf("asked %v, want %v", asks, tc.wantAsks)
			}
			if rd.Truncate == nil || rd.Truncate.To != tc.wantTo || rd.Truncate.Fully {
				t.Fatalf("truncation %+v, want to %d", rd.Truncate, tc.wantTo)
			}
			if p := r.NextFetch(); p.Kind != FetchNone {
				t.Errorf("plan %+v before the truncation is reported, want none", p)
			}
			r.Truncated(0, tc.wantTo)
			if p := r.NextFetch(); p.Kind != FetchRecords || p.Offset != tc.wantTo {
				t.Errorf("plan %+v after the truncation, want records from %d", p, tc.wantTo)
			}
		})
	}
}

// TestFollowerIgnoresStrayAnswers: answers that do not match the outstanding query change
// nothing.
func TestFollowerIgnoresStrayAnswers(t *testing.T) {
	r := New(Config{ReplicaID: 2}, LogState{EndOffset: 30, Epochs: entries(1, 0, 3, 10)})
	r.BecomeFollower(FollowerUpdate{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}}, testNow)
	r.Ready()
	r.EpochAnswered(1, 1, 5)           // not the epoch asked (3)
	r.EpochAnswered(4, 3, 5)           // an answer above the epoch asked
	r.FetchAnswered(4, 30, 0, testNow) // no fetch yet
	r.OutOfRange(40, 50)
	if rd := r.Ready(); !rd.Empty() {
		t.Fatalf("stray answers made %+v", rd)
	}
	if p := r.NextFetch(); p.Kind != FetchEpochQuery || p.Epoch != 3 {
		t.Fatalf("plan %+v, want the query for epoch 3 still", p)
	}
}

// TestOutOfRange: below the leader's start the log restarts there (and the epoch cache is
// cleared); above its end the follower asks for its epoch's end again.
func TestOutOfRange(t *testing.T) {
	newFetching := func() *Replica {
		r := New(Config{ReplicaID: 2}, LogState{StartOffset: 0, EndOffset: 30, HighWatermark: 20, Epochs: entries(1, 0, 3, 10)})
		r.BecomeFollower(FollowerUpdate{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}}, testNow)
		r.EpochAnswered(3, 3, 30)
		r.Truncated(0, 30)
		r.Ready()
		return r
	}
	r := newFetching()
	r.OutOfRange(50, 70)
	rd := r.Ready()
	if rd.Truncate == nil || *rd.Truncate != (Truncation{To: 50, Fully: true}) {
		t.Fatalf("truncation %+v, want fully to 50", rd.Truncate)
	}
	r.Truncated(50, 50)
	rd = r.Ready()
	if !rd.EpochsChanged || len(rd.Epochs) != 0 || !rd.HighWatermarkChanged || rd.HighWatermark != 50 {
		t.Fatalf("after the full truncation: %+v, want an empty cache and the high watermark at 50", rd)
	}
	if p := r.NextFetch(); p.Kind != FetchRecords || p.Offset != 50 || p.LogStartOffset != 50 {
		t.Fatalf("plan %+v, want records from 50", p)
	}

	r = newFetching()
	r.OutOfRange(0, 25)
	if p := r.NextFetch(); p.Kind != FetchEpochQuery || p.Epoch != 3 {
		t.Fatalf("plan %+v, want the query for epoch 3", p)
	}
}

// TestTruncationBelowLogStart: a leader whose log ends below this follower's log start (an
// unclean election, or a leader that lost unsynced records) makes the follower restart its log
// at the leader's end, as Kafka's UnifiedLog.truncateTo does below the log start, rather than
// empty it at its own start and fetch from above the leader's end forever.
func TestTruncationBelowLogStart(t *testing.T) {
	// After the leader's epoch answer.
	r := New(Config{ReplicaID: 2}, LogState{StartOffset: 100, EndOffset: 150, DurableOffset: 150, HighWatermark: 120, Epochs: entries(1, 0, 3, 90)})
	r.BecomeFollower(FollowerUpdate{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}}, testNow)
	r.Ready()
	if p := r.NextFetch(); p.Kind != FetchEpochQuery || p.Epoch != 3 {
		t.Fatalf("plan %+v, want the query for epoch 3", p)
	}
	r.EpochAnswered(3, 3, 80)
	rd := r.Ready()
	if rd.Truncate == nil || *rd.Truncate != (Truncation{To: 80, Fully: true}) {
		t.Fatalf("truncation %+v, want fully to 80", rd.Truncate)
	}
	r.Truncated(80, 80)
	if p := r.NextFetch(); p.Kind != FetchRecords || p.Offset != 80 || p.LogStartOffset != 80 {
		t.Fatalf("plan %+v, want records from 80", p)
	}

	// After OFFSET_OUT_OF_RANGE above the leader's end, with an empty epoch cache.
	r = New(Config{ReplicaID: 2}, LogState{StartOffset: 100, EndOffset: 150, DurableOffset: 150})
	r.BecomeFollower(FollowerUpdate{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}}, testNow)
	r.Ready()
	r.OutOfRange(0, 80)
	rd = r.Ready()
	if rd.Truncate == nil || *rd.Truncate != (Truncation{To: 80, Fully: true}) {
		t.Fatalf("truncation %+v, want fully to 80", rd.Truncate)
	}
	r.Truncated(80, 80)
	if p := r.NextFetch(); p.Kind != FetchRecords || p.Offset != 80 {
		t.Fatalf("plan %+v, want records from 80", p)
	}
}
