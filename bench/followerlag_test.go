package bench

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
)

// lagTime reads how long ago the leader's end was where the follower's is: 0 when caught up,
// interpolated between the samples around it, the oldest sample's age when the follower is
// behind every sample (a lower bound).
func TestLagTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := []leaderEnd{
		{t0, 100},
		{t0.Add(10 * time.Millisecond), 200},
		{t0.Add(20 * time.Millisecond), 200},
		{t0.Add(30 * time.Millisecond), 400},
	}
	now := h[len(h)-1].t
	for _, c := range []struct {
		end  int64
		want time.Duration
	}{
		{400, 0},
		{450, 0},                     // ahead of the sample (a read between two): caught up
		{300, 5 * time.Millisecond},  // half way from 200 at 20 ms to 400 at 30 ms
		{200, 10 * time.Millisecond}, // the leader left 200 at 20 ms
		{150, 25 * time.Millisecond}, // half way from 100 at 0 to 200 at 10 ms
		{100, 30 * time.Millisecond}, // the leader left 100 at 0
		{50, 30 * time.Millisecond},  // behind every sample: the oldest's age
		{399, 50 * time.Microsecond}, // 199/200 of the way from 20 to 30 ms
	} {
		got := lagTime(h, c.end, now)
		if d := got - c.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("lagTime(end %d) = %v, want %v", c.end, got, c.want)
		}
	}
	if got := lagTime(nil, 10, now); got != 0 {
		t.Errorf("no history: %v, want 0", got)
	}
}

// positionsDriver is a Sluice driver whose followers stand a fixed number of records behind a
// leader whose end moves on at every read.
type positionsDriver struct {
	*SluiceDriver
	behind int64
	mu     sync.Mutex
	leo    int64
	reads  int
	fail   bool
}

func (d *positionsDriver) ReplicaPositions(ctx context.Context, topic string) ([]ReplicaPosition, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reads++
	if d.fail {
		return nil, errors.New("describe replicas: not supported")
	}
	d.leo += 1000
	return []ReplicaPosition{
		{Partition: 0, Follower: 1, LeaderLEO: d.leo, FollowerLEO: d.leo - d.behind},
		{Partition: 0, Follower: 2, LeaderLEO: d.leo, FollowerLEO: d.leo},
	}, nil
}

func (d *positionsDriver) Unwrap() Driver { return d.SluiceDriver }

// A produce or e2e run with FollowerLagEvery samples the followers over its measured window
// and reports their lag in records and in time; a driver that cannot say where its followers
// stand is refused before anything is produced; failed reads are counted, not fatal.
func TestFollowerLagSampled(t *testing.T) {
	br := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sd, err := NewSluiceDriver(ctx, "sluice-tcp", br.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	d := &positionsDriver{SluiceDriver: sd, behind: 3000}
	base := Config{Topic: "lag", Partitions: 1, CreateTopic: true, RecordSize: 100, Producers: 1, Acks: 1, AcksSet: true,
		Compression: "none", BatchSize: 16384, LingerMs: 1, FollowerLagEvery: 2 * time.Millisecond}

	c := base
	c.Rate, c.Duration = 5000, 300*time.Millisecond
	r, err := Produce(ctx, d, c)
	if err != nil {
		t.Fatal(err)
	}
	l := r.FollowerLag
	if l == nil || l.Samples < 10 || l.Errors != 0 {
		t.Fatalf("follower lag %+v: want samples from the run, no errors", l)
	}
	// One follower 3,000 records behind, one caught up; the leader's end moves 1,000 a read,
	// so the lagging one is where the leader was three reads ago.
	if l.RecordsMax != 3000 || l.RecordsP99 != 3000 || l.MsP99 <= 0 || l.MsMax < l.MsP99 {
		t.Errorf("follower lag %+v: want 3,000 records at p99 and max, a time above 0", l)
	}
	if l.RecordsP50 != 0 && l.RecordsP50 != 3000 {
		t.Errorf("p50 %v records: want one of the two followers' lags", l.RecordsP50)
	}

	e := base
	e.Topic, e.Rate, e.Duration = "lag-e2e", 2000, 200*time.Millisecond
	r, err = E2E(ctx, d, e)
	if err != nil {
		t.Fatal(err)
	}
	if r.FollowerLag == nil || r.FollowerLag.RecordsMax != 3000 {
		t.Errorf("e2e follower lag %+v: want the followers sampled", r.FollowerLag)
	}

	// Reads that fail are counted and said.
	d.fail = true
	c.Topic = "lag-fail"
	r, err = Produce(ctx, d, c)
	if err != nil {
		t.Fatal(err)
	}
	if r.FollowerLag == nil || r.FollowerLag.Errors == 0 || r.FollowerLag.FirstError == "" || r.FollowerLag.Samples != 0 {
		t.Errorf("follower lag %+v: want the failed reads counted, with the first error", r.FollowerLag)
	}

	// A driver without follower positions: refused up front, nothing produced.
	c.Topic = "lag-none"
	if _, err := Produce(ctx, sd, c); !errors.Is(err, ErrNoReplicaPositions) {
		t.Fatalf("produce with follower lag on a plain driver: %v, want ErrNoReplicaPositions", err)
	}
	topics, err := sd.admin.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics {
		if tp.Name == "lag-none" {
			t.Error("the refused run created its topic")
		}
	}

	// Repeated runs report the medians of the runs' lags.
	sum := Summarize([]Result{{FollowerLag: &FollowerLag{Samples: 5, MsP99: 1}}, {FollowerLag: &FollowerLag{Samples: 5, MsP99: 3}}, {FollowerLag: &FollowerLag{Samples: 5, MsP99: 2}}})
	if sum.FollowerLag == nil || sum.FollowerLag.MsP99 != 2 || sum.FollowerLag.Samples != 15 || sum.Spread["follower_lag.ms_p99"] != [2]float64{1, 3} {
		t.Errorf("summary %+v, spread %v", sum.FollowerLag, sum.Spread["follower_lag.ms_p99"])
	}
	if p50, p99, top := percentiles([]float64{5, 1, 4, 2, 3}); p50 != 3 || p99 != 5 || top != 5 || math.IsNaN(p50) {
		t.Errorf("percentiles = %v %v %v", p50, p99, top)
	}
}
