package segment

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
)

// TestRollTakesTheReservedStandby: once the active segment is half full the flusher creates
// the next segment's file and reserves it whole (the standby segment), so at the roll the new
// segment's blocks are already reserved, and no fallocate ever runs on the file the appends
// write while they write it (standby.go).
func TestRollTakesTheReservedStandby(t *testing.T) {
	var mu sync.Mutex
	var ops []string
	record := func(op vfs.Op, path string) error {
		if op == vfs.OpSync || op == vfs.OpPreallocate {
			mu.Lock()
			ops = append(ops, op.String()+" "+filepath.Base(path))
			mu.Unlock()
		}
		return nil
	}
	o := standbyOptions(&vfs.ErrorFS{FS: vfs.Default, Inject: record})
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	defer l.Close()
	b := sizedBatch(t, 64<<10, 1)
	for range 16 { // 1 MiB: the first segment, full
		mustAppend(t, l, b)
	}
	first := l.active.base
	waitForStandby(t, l, "once the active one was full")
	if sb := l.standby.Load(); sb.reserved != o.SegmentBytes {
		t.Fatalf("standby reserved to %d, want segment.bytes %d", sb.reserved, o.SegmentBytes)
	}
	mu.Lock()
	ops = nil
	mu.Unlock()
	info := mustAppend(t, l, b) // rolls
	if l.active.base == first || l.active.base != info.FirstOffset {
		t.Fatalf("no roll: active segment %d", l.active.base)
	}
	if got := l.active.preallocTo.Load(); got != o.SegmentBytes {
		t.Fatalf("new segment reserved to %d at the roll, want %d (the standby's)", got, o.SegmentBytes)
	}
	if left := standbyFiles(t, dir); len(left) != 0 {
		t.Fatalf("standby files still there after the roll: %v", left)
	}
	oldLog := fmt.Sprintf("%020d.log", first)
	newLog := fmt.Sprintf("%020d.log", info.FirstOffset)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		seen := append([]string(nil), ops...)
		mu.Unlock()
		if slices.Contains(seen, "preallocate "+newLog) {
			t.Fatalf("the new segment's file was reserved while it took appends: %v", seen)
		}
		if slices.Contains(seen, "sync "+oldLog) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the roll: %v", seen)
		}
		time.Sleep(time.Millisecond)
	}
	// The taken file goes by the segment's own name: a sync of the new segment is one of
	// newLog's (not of a temporary name's).
	for range 4 {
		mustAppend(t, l, b)
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	seen := append([]string(nil), ops...)
	mu.Unlock()
	if !slices.Contains(seen, "sync "+newLog) {
		t.Fatalf("no sync of %s after the roll: %v", newLog, seen)
	}
	// Appends to the new segment land, and the log reads back whole after a reopen.
	end := l.EndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpen(t, dir, o)
	defer l2.Close()
	if l2.EndOffset() != end {
		t.Fatalf("reopened at end %d, want %d", l2.EndOffset(), end)
	}
}

// standbyFiles lists the standby segment files in dir.
func standbyFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, standbyPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// standbyOptions are 1 MiB segments reserved in 256 KiB steps, without writeback, on fsys: a
// standby segment is made once 512 KiB are appended.
func standbyOptions(fsys vfs.FS) Options {
	o := testOptions(fsys)
	o.SegmentBytes = 1 << 20
	o.PreallocateBytes = 256 << 10
	o.WritebackBytes = -1
	return o
}

// waitForStandby waits for the flusher to have a standby segment ready, or fails saying why
// one was expected.
func waitForStandby(t *testing.T, l *Log, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.standby.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatal("no standby segment " + why)
		}
		time.Sleep(time.Millisecond)
	}
}

// A standby segment goes with the log: Close deletes it, and one a crash left behind is
// deleted at Open. When it cannot be made (its file cannot be created), rolls go on as
// before.
func TestStandbySegmentLifecycle(t *testing.T) {
	o := standbyOptions(vfs.Default)
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	b := sizedBatch(t, 64<<10, 1)
	for range 10 {
		mustAppend(t, l, b)
	}
	waitForStandby(t, l, "past half")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if left := standbyFiles(t, dir); len(left) != 0 {
		t.Fatalf("standby files after Close: %v", left)
	}

	if err := os.WriteFile(filepath.Join(dir, standbyPrefix+"7.log.tmp"), []byte("left by a crash"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, o)
	if left := standbyFiles(t, dir); len(left) != 0 {
		t.Fatalf("a leftover standby file after Open: %v", left)
	}
	l.Close()

	for _, refused := range []vfs.Op{vfs.OpCreate, vfs.OpRename} {
		var refusals atomic.Int64
		refuse := func(op vfs.Op, path string) error {
			// The standby's creation, or its rename to the new segment's log file.
			if op == refused && (strings.HasPrefix(filepath.Base(path), standbyPrefix) || op == vfs.OpRename && filepath.Ext(path) == ".log") {
				refusals.Add(1)
				return errors.New("injected")
			}
			return nil
		}
		o.FS = &vfs.ErrorFS{FS: vfs.Default, Inject: refuse}
		o.WritebackBytes = 64 << 10 // the flusher wakes at every append: room to retry
		dir = t.TempDir()
		l = mustOpen(t, dir, o)
		for range 10 { // past half the first segment
			mustAppend(t, l, b)
		}
		// Past half: the flusher tries to make a standby (refused), or makes one whose rename
		// at the roll is refused.
		ready := func() bool { return refusals.Load() > 0 }
		if refused == vfs.OpRename {
			ready = func() bool { return l.standby.Load() != nil }
		}
		deadline := time.Now().Add(10 * time.Second)
		for !ready() {
			if time.Now().After(deadline) {
				t.Fatalf("%v: the flusher made no attempt at a standby", refused)
			}
			time.Sleep(time.Millisecond)
		}
		for i := range 30 { // two rolls, with no standby taken
			mustAppend(t, l, b)
			if i < 5 {
				time.Sleep(2 * time.Millisecond) // wake-ups the flusher could retry at
			}
		}
		if refusals.Load() == 0 {
			t.Fatalf("%v: nothing was refused", refused)
		}
		// A refused standby is not tried again until the next roll: at most one try per
		// segment, not one per wake-up.
		if n := refusals.Load(); refused == vfs.OpCreate && n > int64(len(l.Segments())) {
			t.Fatalf("%d refused creations for %d segments", n, len(l.Segments()))
		}
		if n := len(l.Segments()); n < 3 {
			t.Fatalf("%v refused: %d segments after 2.5 MiB in 1 MiB segments", refused, n)
		}
		end := l.EndOffset()
		if err := l.Close(); err != nil {
			t.Fatalf("%v refused: Close: %v", refused, err)
		}
		o.FS = vfs.Default
		l = mustOpen(t, dir, o)
		if l.EndOffset() != end {
			t.Fatalf("%v refused: reopened at %d, want %d", refused, l.EndOffset(), end)
		}
		l.Close()
	}
}

// TestRollFinishesOnlyTheRolledSegment: a roll that nobody waits on syncs the rolled segment
// and moves the synced offset and the recovery point to the new segment's base, but does not
// fsync the new segment, which is taking appends; a waiter then gets it synced.
func TestRollFinishesOnlyTheRolledSegment(t *testing.T) {
	var mu sync.Mutex
	syncs := map[string]int{}
	record := func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			mu.Lock()
			syncs[filepath.Base(path)]++
			mu.Unlock()
		}
		return nil
	}
	syncsOf := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return syncs[name]
	}
	o := testOptions(&vfs.ErrorFS{FS: vfs.Default, Inject: record})
	o.SegmentBytes = 1 << 20
	o.WritebackBytes = -1
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	defer l.Close()
	b := sizedBatch(t, 64<<10, 1)
	for range 18 { // 16 fill the first segment; the 17th rolls
		mustAppend(t, l, b)
	}
	newBase := l.active.base
	if newBase != 16 {
		t.Fatalf("active segment %d, want a roll at 16", newBase)
	}
	oldLog, newLog := fmt.Sprintf("%020d.log", 0), fmt.Sprintf("%020d.log", newBase)
	deadline := time.Now().Add(10 * time.Second)
	for l.SyncedOffset() < newBase {
		if time.Now().After(deadline) {
			t.Fatalf("synced offset %d, want the roll's %d", l.SyncedOffset(), newBase)
		}
		time.Sleep(time.Millisecond)
	}
	if syncsOf(oldLog) == 0 {
		t.Fatal("the rolled segment is counted durable without an fsync")
	}
	time.Sleep(50 * time.Millisecond) // give a wrong flusher time to sync the active segment
	if n := syncsOf(newLog); n != 0 {
		t.Fatalf("the active segment was synced %d times with nobody waiting", n)
	}
	if got := l.SyncedOffset(); got != newBase {
		t.Fatalf("synced offset %d, want %d: the active segment is not synced", got, newBase)
	}
	// The flusher moves the synced offset before it writes the recovery point (temp file,
	// fsync, rename, fsync of the directory), which on a loaded disk takes longer than the
	// sleep above: wait for the recovery point to reach the roll.
	deadline = time.Now().Add(10 * time.Second)
	for {
		cp, ok, err := readCheckpoint(l)
		if err != nil { // the file is replaced by a rename: never seen torn
			t.Fatalf("recovery point: %v", err)
		}
		if ok && cp.offset == newBase {
			if cp.segment != newBase || cp.pos != 0 {
				t.Fatalf("recovery point %+v, want the new segment's start", cp)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recovery point %+v (%v), want the new segment's start", cp, ok)
		}
		time.Sleep(time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if syncsOf(newLog) == 0 || l.SyncedOffset() != l.EndOffset() {
		t.Fatalf("Sync: %d fsyncs of the active segment, synced %d of %d", syncsOf(newLog), l.SyncedOffset(), l.EndOffset())
	}
}

// TestRollFsyncFailureFailsTheLog: when the flusher finishes a rolled segment on its own (no
// waiter) and that segment's fsync fails, the log fails: the synced offset does not move to
// the new segment, and appends and syncs report the failure.
func TestRollFsyncFailureFailsTheLog(t *testing.T) {
	var armed atomic.Bool
	first := fmt.Sprintf("%020d.log", 0)
	fsys := &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		if armed.Load() && op == vfs.OpSync && filepath.Base(path) == first {
			return vfs.EIO
		}
		return nil
	}}
	o := testOptions(fsys)
	o.SegmentBytes = 1 << 20
	o.WritebackBytes = -1
	l := mustOpen(t, t.TempDir(), o)
	defer l.Close()
	b := sizedBatch(t, 64<<10, 1)
	for range 16 {
		mustAppend(t, l, b)
	}
	armed.Store(true)
	mustAppend(t, l, b) // rolls; the flusher's fsync of the first segment fails
	deadline := time.Now().Add(10 * time.Second)
	for l.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the rolled segment's fsync failed and the log did not")
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(l.Err(), ErrFailed) || !errors.Is(l.Err(), vfs.EIO) {
		t.Fatalf("log error %v, want ErrFailed wrapping EIO", l.Err())
	}
	if got := l.SyncedOffset(); got >= 16 {
		t.Fatalf("synced offset %d: the failed segment is counted durable", got)
	}
	if _, err := l.Append(b, 7); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the failure: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Sync(ctx); !errors.Is(err, ErrFailed) {
		t.Fatalf("sync after the failure: %v", err)
	}
}

// Under acks=all (an fsync waited for after every append) the standby is still made: its
// reservation goes on by at least one step per wake-up and resumes after each fsync, so it
// becomes ready with no further append. Before each roll the test waits for it (rather than
// count the rolls that found it ready in time, which a loaded machine's scheduler decides:
// CI with two busy loops once had 4 of 5), then checks that every roll took it.
func TestStandbyReadyUnderSyncedAppends(t *testing.T) {
	var taken atomic.Int64
	count := func(op vfs.Op, path string) error {
		if op == vfs.OpRename && filepath.Ext(path) == ".log" {
			taken.Add(1)
		}
		return nil
	}
	o := standbyOptions(&vfs.ErrorFS{FS: vfs.Default, Inject: count})
	l := mustOpen(t, t.TempDir(), o)
	defer l.Close()
	b := sizedBatch(t, 64<<10, 1)
	for i := range 5*16 + 1 { // five rolls, before appends 16, 32, 48, 64 and 80
		if i > 0 && i%16 == 0 {
			waitForStandby(t, l, fmt.Sprintf("after %d synced appends, before roll %d: the reservation stopped", i, i/16))
		}
		mustAppend(t, l, b)
		if err := l.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := taken.Load(); n < 5 {
		t.Fatalf("%d of 5 rolls took a standby", n)
	}
}
