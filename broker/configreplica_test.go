package broker

import (
	"strings"
	"testing"
	"time"
)

// TestReplicaFetchWaitBelowLagTime: replica.fetch.wait.max.ms at or above
// replica.lag.time.max.ms is refused once the whole file is read, naming both keys, whichever
// of them the file sets (the other at its default); below it the file is taken. A Config built
// in code is refused by Open the same way.
func TestReplicaFetchWaitBelowLagTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		wait time.Duration
		lag  time.Duration
	}{
		{"", true, 0, 0},
		{"replica.fetch.wait.max.ms=1000\nreplica.lag.time.max.ms=2000\n", true, time.Second, 2 * time.Second},
		{"replica.lag.time.max.ms=2000\nreplica.fetch.wait.max.ms=1999\n", true, 1999 * time.Millisecond, 2 * time.Second},
		{"replica.fetch.wait.max.ms=2000\nreplica.lag.time.max.ms=2000\n", false, 0, 0},
		{"replica.fetch.wait.max.ms=30000\n", false, 0, 0}, // the lag time's default, 30 s
		{"replica.lag.time.max.ms=400\n", false, 0, 0},     // below the wait's default, 500 ms
	} {
		var c Config
		_, err := ReadProperties(strings.NewReader(tc.in), &c)
		if !tc.ok {
			if err == nil || !strings.Contains(err.Error(), "replica.fetch.wait.max.ms") || !strings.Contains(err.Error(), "replica.lag.time.max.ms") {
				t.Errorf("%q: err %v, want a refusal naming both keys", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if c.ReplicaFetchWait != tc.wait || c.ReplicaLagTimeMax != tc.lag {
			t.Errorf("%q: wait %v lag %v, want %v %v", tc.in, c.ReplicaFetchWait, c.ReplicaLagTimeMax, tc.wait, tc.lag)
		}
	}
	cfg := testConfig(t, t.TempDir())
	cfg.ReplicaFetchWait, cfg.ReplicaLagTimeMax = time.Minute, time.Second
	if b, err := Open(cfg); err == nil {
		_ = b.Close(t.Context())
		t.Fatal("Open took replica.fetch.wait.max.ms above replica.lag.time.max.ms")
	} else if !strings.Contains(err.Error(), "replica.lag.time.max.ms") {
		t.Fatalf("Open: %v, want it to name replica.lag.time.max.ms", err)
	}
}
