package broker

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// fakeSpace is a filesystem's space as the monitor reads it, set by the test. Like a real
// filesystem, it has the ballast file's bytes more free while the file is missing from dir.
type fakeSpace struct {
	dir string
	mu  sync.Mutex
	// free is the free space outside the ballast; total the filesystem's size.
	free, total int64
	ballast     int64 // the ballast's size, free while its file is missing
	err         error
}

func (f *fakeSpace) readSpace(string) (spaceStat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return spaceStat{}, f.err
	}
	free := f.free
	if _, err := os.Stat(filepath.Join(f.dir, ballastFile)); err != nil {
		free += f.ballast
	}
	return spaceStat{free: max(free, 0), total: f.total}, nil
}

func (f *fakeSpace) setFree(n int64) {
	f.mu.Lock()
	f.free = n
	f.mu.Unlock()
}

const mib = 1 << 20

// The state machine: thresholds entered below, left only 1/16 of the threshold above, worse
// states first; a threshold of 0 is none.
func TestNextSpaceState(t *testing.T) {
	l := spaceLimits{alert: 100 * mib, min: 32 * mib}
	for _, c := range []struct {
		name string
		prev spaceState
		free int64
		lim  spaceLimits
		want spaceState
	}{
		{"plenty", spaceOK, 1 << 30, l, spaceOK},
		{"at the alert line", spaceOK, 100 * mib, l, spaceOK},
		{"below the alert line", spaceOK, 100*mib - 1, l, spaceAlert},
		{"below the min line from ok", spaceOK, 32*mib - 1, l, spaceDegraded},
		{"alert stays in the hysteresis", spaceAlert, 100*mib + 100*mib/16 - 1, l, spaceAlert},
		{"alert leaves past it", spaceAlert, 100*mib + 100*mib/16, l, spaceOK},
		{"degraded stays in the hysteresis", spaceDegraded, 32*mib + 2*mib - 1, l, spaceDegraded},
		{"degraded leaves to alert", spaceDegraded, 34 * mib, l, spaceAlert},
		{"degraded leaves to ok at once", spaceDegraded, 1 << 30, l, spaceOK},
		{"degraded to alert keeps alert's hysteresis", spaceDegraded, 101 * mib, l, spaceAlert},
		{"no thresholds", spaceOK, 0, spaceLimits{}, spaceOK},
		{"only an alert", spaceOK, 0, spaceLimits{alert: mib}, spaceAlert},
	} {
		if got := nextSpaceState(c.prev, c.free, c.lim); got != c.want {
			t.Errorf("%s: %v with %d free: %v, want %v", c.name, c.prev, c.free, got, c.want)
		}
	}
}

// The thresholds and the ballast's size from the keys, against the filesystem's size.
func TestSpaceLimitsAndBallastSize(t *testing.T) {
	const gib = 1 << 30
	d := DefaultConfig()
	for _, c := range []struct {
		name        string
		cfg         func(*Config)
		total       int64
		want        spaceLimits
		wantBallast int64
	}{
		{"defaults on 1 TiB", nil, 1024 * gib, spaceLimits{alert: 1024 * gib / 100 * 5, min: gib}, 64 * mib},
		{"defaults on 10 GiB: 2 % minimum", nil, 10 * gib, spaceLimits{alert: 10 * gib / 100 * 5, min: 10 * gib / 50}, 64 * mib},
		{"defaults on 64 MiB: small ballast", nil, 64 * mib, spaceLimits{alert: 64 * mib / 100 * 5, min: 64 * mib / 50}, 64 * mib / 50},
		{"alert bytes over the percent", func(c *Config) { c.SpaceAlertFreeBytes = 200 * gib }, 1024 * gib, spaceLimits{alert: 200 * gib, min: gib}, 64 * mib},
		{"no percent", func(c *Config) { c.SpaceAlertFreePercent = -1 }, 1024 * gib, spaceLimits{alert: gib, min: gib}, 64 * mib},
		{"explicit minimum lifts the alert", func(c *Config) { c.SpaceMinFreeBytes = 100 * gib }, 1024 * gib, spaceLimits{alert: 100 * gib, min: 100 * gib}, 64 * mib},
		{"never degraded", func(c *Config) { c.SpaceMinFreeBytes = -1 }, 1024 * gib, spaceLimits{alert: 1024 * gib / 100 * 5}, 64 * mib},
		{"no ballast", func(c *Config) { c.BallastBytes = -1 }, 1024 * gib, spaceLimits{alert: 1024 * gib / 100 * 5, min: gib}, 0},
	} {
		cfg := d
		if c.cfg != nil {
			c.cfg(&cfg)
		}
		cfg = cfg.withDefaults()
		if got := cfg.spaceLimits(c.total); got != c.want {
			t.Errorf("%s: limits %+v, want %+v", c.name, got, c.want)
		}
		if got := cfg.ballastSize(c.total); got != c.wantBallast {
			t.Errorf("%s: ballast %d, want %d", c.name, got, c.wantBallast)
		}
	}
}

// The monitor over a sequence of readings: the state, whether the ballast file exists,
// whether produce is admitted and whether a 64 MiB reserve step is granted, after each. The
// ballast (8 MiB) goes when the disk is degraded and comes back when space returns, and the
// state is judged as if it were there, so releasing it moves nothing. onLow (the logs drop
// their standby segments) runs when the state falls from ok, not at each worse step.
func TestDiskMonitorStates(t *testing.T) {
	dir := t.TempDir()
	fake := &fakeSpace{dir: dir, total: 1 << 30, ballast: 8 * mib}
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.SpaceAlertFreeBytes = 400 * mib
	cfg.SpaceMinFreeBytes = 100 * mib
	cfg.BallastBytes = 8 * mib
	cfg.spaceStat = fake
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	m := newDiskMonitor(cfg.withDefaults())
	falls := 0
	m.onLow = func() { falls++ }
	for i, s := range []struct {
		free        int64 // outside the ballast
		state       spaceState
		ballast     bool
		admit       bool
		reserveStep bool
	}{
		{900 * mib, spaceOK, true, true, true},
		{650 * mib, spaceOK, true, true, false}, // 250 MiB above alert: < 4 steps of room
		{399 * mib, spaceAlert, true, true, false},
		{99 * mib, spaceDegraded, false, false, false},
		{99 * mib, spaceDegraded, false, false, false},  // the ballast's release moved nothing
		{105 * mib, spaceDegraded, false, false, false}, // inside the hysteresis
		{107 * mib, spaceAlert, true, true, false},
		{1000 * mib, spaceOK, true, true, true},
	} {
		fake.setFree(s.free)
		m.check()
		_, err := os.Stat(filepath.Join(dir, ballastFile))
		ballast := err == nil
		admitErr := m.admit()
		reserved := m.reserve(64 * mib)
		if got := spaceState(m.state.Load()); got != s.state || ballast != s.ballast || (admitErr == nil) != s.admit || reserved != s.reserveStep {
			t.Fatalf("step %d, %d MiB free: state %v ballast %v admit %v reserve %v, want %v %v %v %v",
				i, s.free/mib, got, ballast, admitErr, reserved, s.state, s.ballast, s.admit, s.reserveStep)
		}
		if admitErr != nil && (!errors.Is(admitErr, ErrDiskFull) || !strings.Contains(admitErr.Error(), "MiB free")) {
			t.Fatalf("step %d: refusal %q, want ErrDiskFull saying how much is free", i, admitErr)
		}
	}
	if falls != 1 {
		t.Fatalf("onLow ran %d times, want once (the one fall from ok)", falls)
	}
}

// Appends and reservations are counted against the last reading: once they would have taken
// it below the degraded line the monitor reads again at once rather than at its next tick.
// A monitor whose readings fail refuses nothing and grants every reservation.
func TestDiskMonitorCountsAppendsAndFailsOpen(t *testing.T) {
	dir := t.TempDir()
	fake := &fakeSpace{dir: dir, total: 1 << 30, err: errors.New("no statfs")}
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.SpaceMinFreeBytes = 100 * mib
	cfg.BallastBytes = -1
	cfg.spaceStat = fake
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	m := newDiskMonitor(cfg.withDefaults())
	m.check()
	if m.admit() != nil || !m.reserve(1<<40) {
		t.Fatal("a monitor without a reading refused produce or a reservation")
	}
	fake.mu.Lock()
	fake.err, fake.free = nil, 150*mib
	fake.mu.Unlock()
	m.check()
	m.appended(40 * mib)
	select {
	case <-m.wake:
		t.Fatal("a check asked for while above the line")
	default:
	}
	m.appended(20 * mib) // 90 MiB left by the count
	select {
	case <-m.wake:
	default:
		t.Fatal("no check asked for once appends passed the degraded line")
	}
}

// Over the protocol, with the free space injected: on a full disk a client's produce gets a
// retriable KAFKA_STORAGE_ERROR saying the disk is full and how much is free, while fetch,
// metadata and topic deletion go on; once space returns, produce resumes by itself.
func TestFullDiskRefusesProduceAndResumes(t *testing.T) {
	dir := t.TempDir()
	fake := &fakeSpace{dir: dir, free: 10 << 30, total: 20 << 30, ballast: mib}
	cfg := testConfig(t, dir)
	cfg.SpaceMinFreeBytes = 512 * mib
	cfg.BallastBytes = mib
	cfg.spaceStat = fake
	cfg.spaceCheckInterval = 5 * time.Millisecond
	cfg.PreallocateBytes = 256 << 10
	logs := captureLogs(&cfg)
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "keep", 1, wire.ConfigEntry{Name: "segment.bytes", Value: strPtr("1048576")})
	createTopic(t, c, "drop", 1)
	if r := produce(t, c, "keep", 0, wire.AcksAll, records(t, "before")); r.ErrorCode != wire.NoError {
		t.Fatalf("produce with space: %v", r.ErrorCode)
	}
	if _, err := os.Stat(filepath.Join(dir, ballastFile)); err != nil {
		t.Fatalf("no ballast file at start: %v", err)
	}
	// Past half the 1 MiB segment, with room, the log reserves its next segment ahead.
	if r := produce(t, c, "keep", 0, wire.AcksAll, records(t, strings.Repeat("x", 600<<10))); r.ErrorCode != wire.NoError {
		t.Fatalf("produce with space: %v", r.ErrorCode)
	}
	standbys := func() []string {
		names, err := filepath.Glob(filepath.Join(dir, "keep-0", "standby-*"))
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	waitUntil(t, "a standby segment reserved with room", func() bool { return len(standbys()) > 0 })

	fake.setFree(100 * mib)
	var refused wire.ProduceResponsePartition
	waitUntil(t, "produce refused on a full disk", func() bool {
		refused = produce(t, c, "keep", 0, wire.AcksAll, records(t, "refused"))
		return refused.ErrorCode != wire.NoError
	})
	if refused.ErrorCode != wire.ErrKafkaStorageError || !refused.ErrorCode.Retriable() {
		t.Fatalf("produce on a full disk: %v, want the retriable KAFKA_STORAGE_ERROR", refused.ErrorCode)
	}
	if msg := refused.ErrorMessage; msg == nil || !strings.Contains(*msg, "disk full") || !strings.Contains(*msg, "100.0 MiB free") {
		t.Fatalf("refusal message %v, want it to say the disk is full and how much is free", deref(msg))
	}
	if _, err := os.Stat(filepath.Join(dir, ballastFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ballast file still there on a full disk: %v", err)
	}
	waitUntil(t, "the standby segment given back", func() bool { return len(standbys()) == 0 })
	if !strings.Contains(logs(), "disk space degraded") {
		t.Fatalf("no log line for the degraded state:\n%s", logs())
	}
	// Reads, metadata and deletion go on.
	// (The probes accepted before the monitor's next reading are there too.)
	if got := fetchedValues(t, fetchP(t, c, "keep", 0, 0, 0, 0).Records); len(got) == 0 || got[0] != "before" {
		t.Fatalf("fetch on a full disk: %q", got)
	}
	var md wire.MetadataResponse
	call(t, c, &wire.MetadataRequest{Topics: []string{"keep"}}, &md)
	if len(md.Topics) != 1 || md.Topics[0].ErrorCode != wire.NoError {
		t.Fatalf("metadata on a full disk: %+v", md.Topics)
	}
	var dr wire.DeleteTopicsResponse
	call(t, c, &wire.DeleteTopicsRequest{Topics: []string{"drop"}, TimeoutMs: 5000}, &dr)
	if code := dr.Topics[0].ErrorCode; code != wire.NoError {
		t.Fatalf("delete topic on a full disk: %v", code)
	}

	fake.setFree(5 << 30) // the deletion (or an operator) freed space
	waitUntil(t, "produce resumed", func() bool {
		return produce(t, c, "keep", 0, wire.AcksAll, records(t, "after")).ErrorCode == wire.NoError
	})
	waitUntil(t, "ballast made again", func() bool {
		_, err := os.Stat(filepath.Join(dir, ballastFile))
		return err == nil
	})
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}
