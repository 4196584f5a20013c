package broker

import (
	"testing"
	"time"
)

// TestReplicationQuota: bytes moved past a second's allowance block throttled fetches for as
// long as the rate takes to pay the debt; no rate, no block; a new rate starts full.
func TestReplicationQuota(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var q replicationQuota
	q.take(1<<30, t0)
	if u := q.blockedUntil(t0); !u.IsZero() {
		t.Fatalf("no rate: blocked until %v", u)
	}
	q.setRate(1000, t0)
	if u := q.blockedUntil(t0); !u.IsZero() {
		t.Fatalf("fresh allowance: blocked until %v", u)
	}
	q.take(3000, t0) // 1000 allowance, 2000 debt
	u := q.blockedUntil(t0)
	if d := u.Sub(t0); d < 2*time.Second || d > 2*time.Second+10*time.Millisecond {
		t.Fatalf("2000 bytes of debt at 1000/s: blocked for %v, want 2s", d)
	}
	if u := q.blockedUntil(t0.Add(1500 * time.Millisecond)); u.IsZero() {
		t.Fatal("still in debt after 1.5 s, but not blocked")
	}
	if u := q.blockedUntil(t0.Add(2100 * time.Millisecond)); !u.IsZero() {
		t.Fatalf("debt paid after 2.1 s, blocked until %v", u)
	}
	// An idle stretch refills at most one second of the rate.
	later := t0.Add(time.Hour)
	q.take(1500, later)
	if u := q.blockedUntil(later); u.IsZero() {
		t.Fatal("1500 bytes after an idle hour at 1000/s: the burst is one second's worth, want blocked")
	}
	q.setRate(0, later)
	if u := q.blockedUntil(later); !u.IsZero() {
		t.Fatalf("rate removed: blocked until %v", u)
	}
}
