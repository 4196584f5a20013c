package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ReplicaPosition is one follower of a partition against its leader at one moment, as the
// leader sees it (Kafka's DescribeReplicas-like detail: the leader's log end offset and the
// follower's, the offset of its last fetch).
type ReplicaPosition struct {
	Partition   int32
	Follower    int32 // broker id
	LeaderLEO   int64
	FollowerLEO int64
}

// ReplicaPositionReader is a Driver against a replicated cluster that can say where each
// follower of a topic's partitions stands: what the follower lag sampler reads
// (Config.FollowerLagEvery).
type ReplicaPositionReader interface {
	ReplicaPositions(ctx context.Context, topic string) ([]ReplicaPosition, error)
}

// ErrNoReplicaPositions: a run asked for follower lag (Config.FollowerLagEvery) against a
// driver that cannot say where its followers stand (not a ReplicaPositionReader).
var ErrNoReplicaPositions = errors.New("bench: the driver cannot report its followers' positions")

// FollowerLag is what the follower lag sampler measured over a run's measured window, over
// every follower of every partition of the run's topics: in records (leader LEO − follower
// LEO) and in milliseconds (how long ago the leader's log end was where the follower's is:
// 0 for a follower caught up, the time interpolated between the leader's sampled ends).
type FollowerLag struct {
	Samples    int     `json:"samples"` // follower positions read
	Errors     int     `json:"errors,omitempty"`
	FirstError string  `json:"first_error,omitempty"`
	RecordsP50 float64 `json:"records_p50"`
	RecordsP99 float64 `json:"records_p99"`
	RecordsMax float64 `json:"records_max"`
	MsP50      float64 `json:"ms_p50"`
	MsP99      float64 `json:"ms_p99"`
	MsMax      float64 `json:"ms_max"`
}

// lagHistoryMax bounds the leader log-end history kept per partition (at the default 20 ms
// interval, 80 s): a follower further behind than that gets the oldest entry's age, a lower
// bound.
const lagHistoryMax = 4096

// lagSamplesMax bounds the follower positions a run keeps for its percentiles.
const lagSamplesMax = 1 << 20

// leaderEnd is a partition's leader log end at one sampled moment.
type leaderEnd struct {
	t   time.Time
	leo int64
}

// lagSampler reads every follower's position every interval and keeps the lags of the samples
// taken from measureStart on. Owned by its goroutine until stop returns.
type lagSampler struct {
	read     func(ctx context.Context, topic string) ([]ReplicaPosition, error)
	now      func() time.Time
	topics   []string
	from     time.Time
	history  map[string]map[int32][]leaderEnd // topic → partition → leader ends, oldest first
	records  []float64
	ms       []float64
	errors   int
	firstErr string
}

// checkFollowerLag refuses a run that asks for follower lag of a driver that cannot say where
// its followers stand, before anything starts.
func checkFollowerLag(d Driver, c Config) error {
	if c.FollowerLagEvery <= 0 {
		return nil
	}
	if _, ok := driverAs[ReplicaPositionReader](d); !ok {
		return fmt.Errorf("%w (driver %s): follower lag needs a replicated cluster whose driver reads them", ErrNoReplicaPositions, d.Name())
	}
	return nil
}

// startFollowerLag starts sampling d's followers of the run's topics every c.FollowerLagEvery
// from measureStart on (checkFollowerLag has passed), and returns the function that stops it
// and returns what it measured; nil if c does not ask for it.
func startFollowerLag(ctx context.Context, d Driver, c Config, measureStart time.Time) func() *FollowerLag {
	r, ok := driverAs[ReplicaPositionReader](d)
	if c.FollowerLagEvery <= 0 || !ok {
		return func() *FollowerLag { return nil }
	}
	topics := make([]string, max(c.Topics, 1))
	for i := range topics {
		topics[i] = c.TopicName(i)
	}
	s := &lagSampler{read: r.ReplicaPositions, now: c.Clock.Now, topics: topics, from: measureStart,
		history: map[string]map[int32][]leaderEnd{}}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.FollowerLagEvery)
		defer t.Stop()
		for {
			s.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() *FollowerLag {
		cancel()
		wg.Wait()
		return s.result()
	}
}

// sample reads every topic's follower positions once.
func (s *lagSampler) sample(ctx context.Context) {
	for _, topic := range s.topics {
		ps, err := s.read(ctx, topic)
		if ctx.Err() != nil {
			return // the run ended during the read: not a failure
		}
		now := s.now()
		if err != nil {
			s.errors++
			if s.firstErr == "" {
				s.firstErr = err.Error()
			}
			continue
		}
		s.add(topic, now, ps)
	}
}

// add records one read of a topic's follower positions, taken at now.
func (s *lagSampler) add(topic string, now time.Time, ps []ReplicaPosition) {
	parts := s.history[topic]
	if parts == nil {
		parts = map[int32][]leaderEnd{}
		s.history[topic] = parts
	}
	for _, p := range ps { // the leader's end first, so that a follower's lag is read against it
		h := parts[p.Partition]
		if len(h) == 0 || h[len(h)-1].t.Before(now) {
			if len(h) == lagHistoryMax {
				h = slices.Delete(h, 0, 1)
			}
			parts[p.Partition] = append(h, leaderEnd{t: now, leo: p.LeaderLEO})
		}
	}
	if now.Before(s.from) || len(s.records) >= lagSamplesMax {
		return // the warm-up's, or enough
	}
	for _, p := range ps {
		records := max(p.LeaderLEO-p.FollowerLEO, 0)
		s.records = append(s.records, float64(records))
		s.ms = append(s.ms, float64(lagTime(parts[p.Partition], p.FollowerLEO, now))/1e6)
	}
}

// lagTime is how long before now the leader's log end reached end, from its sampled history
// h (oldest first, the last entry taken at now): 0 if the last entry is not past end;
// interpolated linearly between the two samples around it; the oldest entry's age if every
// sample is past end (a lower bound).
func lagTime(h []leaderEnd, end int64, now time.Time) time.Duration {
	if len(h) == 0 || h[len(h)-1].leo <= end {
		return 0
	}
	// The first sample whose end is past the follower's.
	i, _ := slices.BinarySearchFunc(h, end+1, func(e leaderEnd, target int64) int {
		switch {
		case e.leo < target:
			return -1
		case e.leo > target:
			return 1
		}
		return 0
	})
	if i == 0 {
		return now.Sub(h[0].t)
	}
	a, b := h[i-1], h[i] // a.leo <= end < b.leo
	at := a.t.Add(time.Duration(float64(b.t.Sub(a.t)) * float64(end-a.leo) / float64(b.leo-a.leo)))
	return max(now.Sub(at), 0)
}

// result is the sampler's figures: Samples 0 if no follower had a position to read (none has
// fetched at its leader's epoch yet).
func (s *lagSampler) result() *FollowerLag {
	l := &FollowerLag{Samples: len(s.records), Errors: s.errors, FirstError: s.firstErr}
	l.RecordsP50, l.RecordsP99, l.RecordsMax = percentiles(s.records)
	l.MsP50, l.MsP99, l.MsMax = percentiles(s.ms)
	return l
}

// percentiles returns the p50, p99 and max of v (nearest rank), zeros for none; v is sorted.
func percentiles(v []float64) (p50, p99, top float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	slices.Sort(v)
	rank := func(p float64) float64 {
		i := int(p/100*float64(len(v))+0.999999) - 1
		return v[min(max(i, 0), len(v)-1)]
	}
	return rank(50), rank(99), v[len(v)-1]
}

// summarizeFollowerLag gives a Repeated the medians of its runs' follower lag figures, with
// their spreads ("follower_lag.ms_p99", ...), over the runs that sampled it.
func summarizeFollowerLag(out *Repeated, runs []Result) {
	var lags []*FollowerLag
	for i := range runs {
		if runs[i].FollowerLag != nil {
			lags = append(lags, runs[i].FollowerLag)
		}
	}
	if len(lags) == 0 {
		return
	}
	sum := &FollowerLag{}
	vals := make([]float64, len(lags))
	for _, f := range []struct {
		name string
		get  func(*FollowerLag) *float64
	}{
		{"records_p50", func(l *FollowerLag) *float64 { return &l.RecordsP50 }},
		{"records_p99", func(l *FollowerLag) *float64 { return &l.RecordsP99 }},
		{"records_max", func(l *FollowerLag) *float64 { return &l.RecordsMax }},
		{"ms_p50", func(l *FollowerLag) *float64 { return &l.MsP50 }},
		{"ms_p99", func(l *FollowerLag) *float64 { return &l.MsP99 }},
		{"ms_max", func(l *FollowerLag) *float64 { return &l.MsMax }},
	} {
		for i, l := range lags {
			vals[i] = *f.get(l)
		}
		med, lo, hi := medianSpread(vals)
		*f.get(sum) = med
		if hi > 0 {
			out.Spread["follower_lag."+f.name] = [2]float64{lo, hi}
		}
	}
	for _, l := range lags {
		sum.Samples += l.Samples
		sum.Errors += l.Errors
		if sum.FirstError == "" {
			sum.FirstError = l.FirstError
		}
	}
	out.FollowerLag = sum
}
