package server

import (
	"testing"
)

// The budget charges in arrival order: a frame waiting for the whole budget is not passed by
// smaller ones that arrive after it; a waiter that gives up charges nothing and lets the next
// one through; a nil budget (unbounded) charges nothing.
func TestBudgetOrderAndCancel(t *testing.T) {
	const limit = 100
	b := newBudget(limit)
	never := make(chan struct{})
	mustAcquire := func(n int64) {
		t.Helper()
		if waited, err := b.acquire(n, never, never, never); err != nil || waited {
			t.Fatalf("acquire(%d): waited %v, %v", n, waited, err)
		}
	}
	mustAcquire(60)
	mustAcquire(40)

	type result struct {
		name string
		err  error
	}
	done := make(chan result, 3)
	wait := func(name string, n int64, cancel chan struct{}) {
		go func() {
			_, err := b.acquire(n, cancel, never, never)
			done <- result{name, err}
		}()
	}
	queued := func(k int) func() bool {
		return func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.mu.queue) == k }
	}
	wait("whole", b.charge(1000), never) // larger than the budget: charged all of it
	waitFor(t, "the large waiter queued", queued(1))
	cancelled := make(chan struct{})
	wait("cancelled", 10, cancelled)
	waitFor(t, "the cancelled waiter queued", queued(2))
	wait("small", 10, never)
	waitFor(t, "the small waiter queued", queued(3))

	b.release(40) // room for the small ones, but the large one is first
	if got := b.inUse(); got != 60 {
		t.Fatalf("in use %d after a release with a large waiter first, want 60", got)
	}
	close(cancelled)
	if r := <-done; r.name != "cancelled" || r.err != errStopped {
		t.Fatalf("got %+v, want the cancelled waiter with errStopped", r)
	}
	b.release(60)
	if r := <-done; r.name != "whole" || r.err != nil {
		t.Fatalf("got %+v, want the large waiter charged", r)
	}
	if got := b.inUse(); got != limit {
		t.Fatalf("in use %d, want the whole budget %d", got, limit)
	}
	b.release(limit)
	if r := <-done; r.name != "small" || r.err != nil {
		t.Fatalf("got %+v, want the small waiter charged", r)
	}
	b.release(10)
	if got, w := b.inUse(), b.waiting.Load(); got != 0 || w != 0 {
		t.Fatalf("in use %d, waiting %d at the end", got, w)
	}
	if got := b.waitCount(); got != 3 {
		t.Fatalf("%d waits counted, want 3", got)
	}

	var unbounded *budget
	if waited, err := unbounded.acquire(unbounded.charge(1<<30), never, never, never); waited || err != nil || unbounded.inUse() != 0 {
		t.Fatal("a nil budget charged or waited")
	}
}

// BenchmarkBudget is the request budget's cost per frame: one charge and its release, with no
// waiter (the steady state below the bound), on one goroutine and on all of them at once.
func BenchmarkBudget(b *testing.B) {
	never := make(chan struct{})
	b.Run("serial", func(b *testing.B) {
		bu := newBudget(DefaultQueuedMaxRequestBytes)
		b.ReportAllocs()
		for range b.N {
			if _, err := bu.acquire(4096, never, never, never); err != nil {
				b.Fatal(err)
			}
			bu.release(4096)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		bu := newBudget(DefaultQueuedMaxRequestBytes)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := bu.acquire(4096, never, never, never); err != nil {
					b.Fatal(err)
				}
				bu.release(4096)
			}
		})
	})
}
