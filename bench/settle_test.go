package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A Settle that fails (the sync after a probe, an interrupted pause) ends the command with its
// error, after the probe's topic is deleted and before the measured run begins: a run on top
// of an unsettled system would be reported as if it were not.
func TestSettleErrorEndsTheRun(t *testing.T) {
	for _, mode := range []string{ModeProduce, ModeE2E} {
		t.Run(mode, func(t *testing.T) {
			d := newMemDriver()
			errSettle := errors.New("settle: sync failed")
			settles := 0
			c := Config{Topic: "r", CreateTopic: true, RecordSize: 64, RateOfMax: 0.5,
				ProbeDuration: 100 * time.Millisecond, Duration: 100 * time.Millisecond,
				Settle: func(context.Context) error { settles++; return errSettle }}
			run := runFor(mode)
			_, err := run(context.Background(), d, c)
			if !errors.Is(err, errSettle) {
				t.Fatalf("%s returned %v, want the settle's error", mode, err)
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if settles != 1 || len(d.mu.deleted) != 1 || d.mu.deleted[0] != "r-probe-0" {
				t.Errorf("%d settles, topics deleted %v: want the first probe's topic deleted and one settle", settles, d.mu.deleted)
			}
			if recs := len(d.mu.topics["r"]); recs != 0 {
				t.Errorf("the measured run wrote %d records after the settle failed", recs)
			}
		})
	}
}
