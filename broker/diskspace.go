package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// The disk-space monitor: it watches the free space of the filesystem holding the data
// directory and puts the broker in one of Redpanda's three states.
//
//	ok        free >= alert threshold
//	alert     free <  storage.space.alert.free.bytes or .percent of the filesystem: logged (at
//	          the change, then every minute while it lasts); nothing is refused, but no more
//	          disk is reserved ahead (log.preallocate.bytes)
//	degraded  free <  storage.space.min.free.bytes: client produce is refused with a retriable
//	          KAFKA_STORAGE_ERROR saying the disk is full and how much is free; fetches,
//	          metadata, offset commits, topic deletion and retention go on. The ballast file
//	          is deleted, so that raft (meta/raft.db) can still commit the deletion of a topic
//	          and the logs can still write their recovery points.
//
// "free" is what the broker's user may allocate (statfs f_bavail) minus the ballast's size
// while the ballast is deleted: the thresholds are judged as if it were there, so deleting it
// (or making it again) never moves the state, and the state leaves degraded only once space
// outside the ballast returns; then the ballast is made again. Leaving a state upwards needs
// 1/16 of its threshold more than entering it, so a disk at the line does not flap.
//
// Checks: every spaceCheckInterval, at once when a topic deletion or retention freed space,
// and when the bytes appended and reserved since the last check would have taken free space
// below the degraded line (each append and each reservation is counted against the last
// reading, so a fast producer cannot run far past the line between two checks).
//
// Reserve ahead (segment.Options.Reserve) is granted only in the ok state, and a step only
// when it is at most a quarter of the space above the alert threshold: the reserves of many
// logs together never reach the alert line, and a filesystem with less than four steps of
// room (256 MiB above the line with the default 64 MiB) reserves nothing ahead at all, which
// only costs the latency that preallocation saves on ext4. When the state falls from ok, the
// logs drop their standby segments (up to segment.bytes each, reserved while there was
// room), so that the space they hold unused goes back to the data; an active segment's
// reserve (at most log.preallocate.bytes) is used by its next appends or given back at its
// roll.
//
// Ownership: check runs on the monitor's goroutine (and once in Open, before the logs open),
// serialised by mu, which guards the ballast; everything the request paths and the flushers
// read is an atomic.

// spaceState is the broker's disk-space state; the order matters (worse is larger).
type spaceState int32

const (
	spaceOK spaceState = iota
	spaceAlert
	spaceDegraded
)

func (s spaceState) String() string {
	switch s {
	case spaceOK:
		return "ok"
	case spaceAlert:
		return "alert"
	case spaceDegraded:
		return "degraded"
	}
	return fmt.Sprintf("spaceState(%d)", int32(s))
}

// spaceStat is one statfs reading: free is what the broker may still allocate (f_bavail),
// total the filesystem's size, both in bytes.
type spaceStat struct {
	free, total int64
}

// spaceReader reads the space of the filesystem holding dir: statfsReader, or readings that
// tests inject (an interface, not a func, so that Config stays comparable).
type spaceReader interface {
	readSpace(dir string) (spaceStat, error)
}

// statfsReader is statSpace (diskspace_unix.go, diskspace_other.go).
type statfsReader struct{}

func (statfsReader) readSpace(dir string) (spaceStat, error) { return statSpace(dir) }

// spaceLimits are the thresholds in bytes, resolved against a filesystem's size; 0 is none.
// Invariant: alert >= min, so a degraded disk is also past the alert line.
type spaceLimits struct {
	alert, min int64
}

// Defaults that depend on the filesystem's size.
const (
	defaultMinFreeBytes  = 1 << 30 // storage.space.min.free.bytes unset: 1 GiB ...
	defaultMinFreeShare  = 50      // ... or 1/50 (2 %) of the filesystem, the smaller
	ballastShare         = 50      // the ballast is at most 1/50 of the filesystem
	spaceCheckInterval   = time.Second
	spaceReminder        = time.Minute // the alert and degraded states are logged again this often
	reserveHeadroomShare = 4           // a reserve step takes at most 1/4 of the room above alert
)

// spaceLimits resolves the thresholds of c against a filesystem of total bytes.
func (c Config) spaceLimits(total int64) spaceLimits {
	var l spaceLimits
	switch {
	case c.SpaceMinFreeBytes > 0:
		l.min = c.SpaceMinFreeBytes
	case c.SpaceMinFreeBytes == 0:
		l.min = min(defaultMinFreeBytes, total/defaultMinFreeShare)
	}
	l.alert = max(c.SpaceAlertFreeBytes, 0)
	if c.SpaceAlertFreePercent > 0 {
		l.alert = max(l.alert, total/100*c.SpaceAlertFreePercent)
	}
	l.alert = max(l.alert, l.min)
	return l
}

// ballastSize is the ballast file's size on a filesystem of total bytes: storage.ballast.bytes,
// at most 1/50 of the filesystem (a small disk is not half ballast); 0 for none.
func (c Config) ballastSize(total int64) int64 {
	if c.BallastBytes <= 0 {
		return 0
	}
	return min(c.BallastBytes, total/ballastShare)
}

// nextSpaceState is the state after prev for free bytes under limits l: the pure core of the
// monitor. Leaving a state upwards needs free at its threshold plus 1/16 of it.
func nextSpaceState(prev spaceState, free int64, l spaceLimits) spaceState {
	below := func(threshold int64, in bool) bool {
		if threshold <= 0 {
			return false
		}
		if in {
			threshold += threshold / 16
		}
		return free < threshold
	}
	switch {
	case below(l.min, prev == spaceDegraded):
		return spaceDegraded
	case below(l.alert, prev >= spaceAlert):
		return spaceAlert
	}
	return spaceOK
}

// ballastFile is the name of the ballast in the data directory (not a partition's name, which
// has a '-').
const ballastFile = "ballast"

// diskMonitor is the monitor described above, for one data directory.
type diskMonitor struct {
	dir      string
	cfg      Config
	stat     spaceReader
	logger   *slog.Logger
	interval time.Duration
	wake     chan struct{}
	// onLow runs, on the monitor's goroutine, each time the state falls from ok (the broker
	// drops the logs' standby segments). Set before the first check.
	onLow func()

	state atomic.Int32 // a spaceState
	// free is the last reading's free bytes (ballast counted as if present) minus the bytes
	// appended and reserved since; minFree and alertFree the thresholds of that reading.
	free      atomic.Int64
	minFree   atomic.Int64
	alertFree atomic.Int64
	// enabled is false while no reading has succeeded (an unsupported platform, or statfs
	// failing): nothing is refused and every reservation is granted, as without a monitor.
	enabled atomic.Bool

	mu struct {
		sync.Mutex
		ballastWant int64     // the ballast's size for this filesystem (0: none)
		ballastHeld bool      // the ballast file exists at ballastWant bytes
		statErr     bool      // a failed reading was logged; logged again only after a success
		ballastErr  bool      // a failure to make the ballast was logged (once per episode)
		loggedAt    time.Time // the state was last logged
	}
}

func newDiskMonitor(cfg Config) *diskMonitor {
	m := &diskMonitor{
		dir:      cfg.DataDir,
		cfg:      cfg,
		stat:     cfg.spaceStat,
		logger:   cfg.Logger,
		interval: cfg.spaceCheckInterval,
		wake:     make(chan struct{}, 1),
	}
	if m.stat == nil {
		m.stat = statfsReader{}
	}
	if m.interval <= 0 {
		m.interval = spaceCheckInterval
	}
	return m
}

// run checks every interval and on kick until stop is closed.
func (m *diskMonitor) run(stop <-chan struct{}) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-m.wake:
		}
		m.check()
	}
}

// kick asks for a check soon (space was freed, or may have run out); it never blocks.
func (m *diskMonitor) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// check reads the free space, moves the state, and deletes or makes the ballast to match;
// when the state falls from ok it calls onLow, so that the logs give back the standby
// segments they reserved while there was room.
func (m *diskMonitor) check() {
	if fell := m.checkLocked(); fell && m.onLow != nil {
		m.onLow()
	}
}

// checkLocked is check but onLow, which it reports the need for. It takes mu.
func (m *diskMonitor) checkLocked() (fell bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.stat.readSpace(m.dir)
	if err != nil {
		if !m.mu.statErr {
			m.mu.statErr = true
			m.logger.Warn("cannot read the data directory's free space; disk-space states are off until it can", "dir", m.dir, "err", err)
		}
		return false
	}
	m.mu.statErr = false
	lim := m.cfg.spaceLimits(st.total)
	if m.mu.ballastWant == 0 && !m.enabled.Load() {
		m.mu.ballastWant = m.cfg.ballastSize(st.total)
		m.mu.ballastHeld = m.ballastPresent()
	}
	free := st.free
	if !m.mu.ballastHeld {
		free -= m.mu.ballastWant
	}
	prev := spaceState(m.state.Load())
	next := nextSpaceState(prev, free, lim)
	// Logged at each change, and again every spaceReminder while not ok, so that the current
	// log shows it.
	if now := time.Now(); next != prev || next != spaceOK && now.Sub(m.mu.loggedAt) >= spaceReminder {
		m.logTransition(prev, next, st, free, lim)
		m.mu.loggedAt = now
	}
	// The ballast first, then the state: whoever sees the state sees the ballast's too.
	switch {
	case next == spaceDegraded && m.mu.ballastHeld:
		if err := os.Remove(m.ballastPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.logger.Error("cannot delete the ballast file on a full disk", "path", m.ballastPath(), "err", err)
		} else {
			m.mu.ballastHeld = false
			m.logger.Warn("deleted the ballast file: its space is for metadata (topic deletion) and recovery points", "path", m.ballastPath(), "bytes", m.mu.ballastWant)
		}
	case next != spaceDegraded && !m.mu.ballastHeld && m.mu.ballastWant > 0:
		if err := makeBallast(m.ballastPath(), m.mu.ballastWant); err != nil {
			_ = os.Remove(m.ballastPath())
			if !m.mu.ballastErr {
				m.mu.ballastErr = true
				m.logger.Warn("cannot make the ballast file", "path", m.ballastPath(), "bytes", m.mu.ballastWant, "err", err)
			}
		} else {
			m.mu.ballastHeld, m.mu.ballastErr = true, false
		}
	}
	m.minFree.Store(lim.min)
	m.alertFree.Store(lim.alert)
	m.free.Store(free)
	m.state.Store(int32(next))
	m.enabled.Store(true)
	return prev == spaceOK && next != spaceOK
}

func (m *diskMonitor) logTransition(prev, next spaceState, st spaceStat, free int64, lim spaceLimits) {
	args := []any{"dir", m.dir, "from", prev.String(), "free", byteCount(free), "size", byteCount(st.total),
		"alert_below", byteCount(lim.alert), "degraded_below", byteCount(lim.min)}
	switch next {
	case spaceDegraded:
		m.logger.Error("disk space degraded: produce refused until space is freed (delete topics or records, or lower retention)", args...)
	case spaceAlert:
		m.logger.Warn("disk space alert: free space is low; reserving ahead stopped", args...)
	default:
		m.logger.Info("disk space ok", args...)
	}
}

func (m *diskMonitor) ballastPath() string { return filepath.Join(m.dir, ballastFile) }

// ballastPresent reports whether the ballast file exists at its wanted size (made by an
// earlier run of the broker). Called with mu held.
func (m *diskMonitor) ballastPresent() bool {
	fi, err := os.Stat(m.ballastPath())
	return err == nil && fi.Size() == m.mu.ballastWant
}

// admit returns nil if a client's produce may append now, or the error refusing it.
func (m *diskMonitor) admit() error {
	if !m.enabled.Load() {
		return nil
	}
	if spaceState(m.state.Load()) == spaceDegraded {
		return fmt.Errorf("%w: %s free on the filesystem of %s, below storage.space.min.free.bytes (%s); produce resumes by itself once space is freed (delete topics or records, or lower retention)",
			ErrDiskFull, byteCount(max(m.free.Load(), 0)), m.dir, byteCount(m.minFree.Load()))
	}
	return nil
}

// appended counts n bytes appended against the last reading, and asks for a check when they
// would have taken it below the degraded line.
func (m *diskMonitor) appended(n int64) {
	if m.enabled.Load() && m.free.Add(-n) < m.minFree.Load() {
		m.kick()
	}
}

// reserve is segment.Options.Reserve: n more bytes may be reserved ahead only in the ok state
// and when they are at most a quarter of the room above the alert line.
func (m *diskMonitor) reserve(n int64) bool {
	if !m.enabled.Load() {
		return true
	}
	if spaceState(m.state.Load()) != spaceOK {
		return false
	}
	room := m.free.Load() - m.alertFree.Load()
	if n > room/reserveHeadroomShare {
		return false
	}
	if m.free.Add(-n) < m.minFree.Load() {
		m.kick()
	}
	return true
}

// byteCount formats n bytes for a person: "1.5 MiB".
func byteCount(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
