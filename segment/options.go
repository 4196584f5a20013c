package segment

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
)

// Options configure a Log. Zero fields take Kafka's defaults (see Defaults).
type Options struct {
	// FS does every file operation; nil means the operating system.
	FS vfs.FS
	// OpenFiles, shared by the logs of a broker, bounds the log files of sealed segments open
	// at once (log.max.open.files); nil keeps every segment's file open while it is in the log.
	OpenFiles *FileCache
	// SegmentBytes is segment.bytes: a segment rolls before it would grow past this (1 GiB).
	// At most math.MaxInt32, so positions fit the index.
	SegmentBytes int64
	// SegmentMs is segment.ms: a segment rolls once its first batch is this old (7 days).
	SegmentMs time.Duration
	// SegmentJitter is segment.jitter.ms: each segment rolls a random amount earlier than
	// SegmentMs, drawn when the segment is created or opened, uniform below
	// min(SegmentJitter, SegmentMs), so that the partitions of topics created together do not
	// all roll (and later all expire) in the same moment. 0, the default, rolls every segment
	// at SegmentMs exactly.
	SegmentJitter time.Duration
	// IndexIntervalBytes is index.interval.bytes: bytes between offset index entries (4096).
	IndexIntervalBytes int
	// SegmentIndexBytes is segment.index.bytes: the preallocated size of each index (10 MiB).
	SegmentIndexBytes int
	// RetentionBytes is retention.bytes: the most the log keeps (negative = no limit; the
	// default is -1). Kafka's 0, which the zero value (the default) cannot say, is
	// ZeroRetentionBytes.
	RetentionBytes int64
	// RetentionMs is retention.ms: how long a segment is kept after its newest record (7 days;
	// negative = forever).
	RetentionMs time.Duration
	// FlushMessages is flush.messages: fsync once this many messages are unsynced (default: never,
	// as Kafka; acks=all producers ask for fsyncs explicitly through WaitSynced).
	FlushMessages int64
	// FlushMs is flush.ms: fsync once data has been unsynced this long (default: never).
	FlushMs time.Duration
	// CheckpointInterval is how often the flusher records the recovery point (Kafka's
	// log.flush.offset.checkpoint.interval.ms, 60 s). Rolls and Close always record it.
	CheckpointInterval time.Duration
	// WritebackBytes starts writeback of the active segment every this many appended bytes
	// (sync_file_range, without waiting), so that dirty pages reach the disk steadily rather
	// than all at once when a rolled segment is fsynced: a 1 GiB fsync saturates the disk and
	// stalls the appends made meanwhile for tens of milliseconds. RocksDB's and Pebble's
	// bytes_per_sync. Default 4 MiB: each step is a burst of I/O submission in the kernel that
	// the whole machine feels, and on this project's test machine (ext4 on a virtio disk, 2
	// vCPUs) 64 MiB steps set an e2e run's p99.9 at 9-10 ms where 4 MiB steps gave 3.5-6.3
	// (BENCHMARKS.md, End-to-end latency); 1 MiB steps once stalled appends for 200 ms, before
	// PreallocateBytes took block allocation out of writeback. Negative turns it off.
	// Durability is unchanged: only an fsync makes data durable.
	WritebackBytes int64
	// PreallocateBytes keeps disk blocks reserved up to this far past the active segment's end
	// (fallocate, keeping the file size; never past segment.bytes): as far as the segment has
	// been written, from 1 MiB up to this, so an idle partition does not hold it all. On ext4 writeback then
	// has no blocks to allocate: without it, appends waited 8-11 ms for the inode lock while
	// writeback read a block bitmap from the disk, every 128 MiB. The reserve is released when
	// the segment is finished (truncated to its size). Once the active segment is half full, the
	// next segment's file is also made and reserved whole, in steps of this size, while nothing
	// writes to it (the standby segment, standby.go), so that after the first segment no
	// fallocate runs on a file taking appends. Default 64 MiB; negative turns both off.
	PreallocateBytes int64
	// Reserve, when set, is asked before each PreallocateBytes step of reserve ahead (the
	// active segment's, and each step of a standby segment's) whether n more bytes of the disk
	// may be reserved now; false skips the step (a standby segment in preparation is then
	// dropped until the next roll). The broker answers from the free space of the filesystem,
	// so that reserving ahead never takes the last of the disk. nil reserves every step.
	Reserve func(n int64) bool
	// MmapAppend writes through a memory mapping of a preallocated segment instead of pwrite.
	// Off by default: see BENCHMARKS.md, Storage engine, for why pwrite won.
	MmapAppend bool
	// RetryBackoff and RetryBackoffMax bound the flusher's retries of the work that failed for
	// want of a resource (vfs.IsTransient) or that it must not skip (a recovery-point write, the
	// active segment's next index pages): the first retry comes after RetryBackoff, each next
	// one after twice the last, at most RetryBackoffMax (1 s and 1 min).
	RetryBackoff, RetryBackoffMax time.Duration
	// DistrustUnsynced makes recovery write again, as it reads them, the bytes it scans past the
	// recovery point, before it syncs them: for reopening a log stopped by a failed fsync, after
	// which the kernel may hold pages it failed to write as clean, so that a second fsync
	// reports success without writing them (Linux does). Bytes the kernel dropped read back
	// from the disk as they are there, fail their CRC, and are cut by the scan first.
	DistrustUnsynced bool
	// OnFailure, if set, is called once when the log stops after an I/O error of its data
	// (Err turns non-nil), with that error: the broker's supervisor reopens it. It runs on the
	// goroutine that met the error, with the log's locks held: it must not block or call the log.
	OnFailure func(err error)
	// Now is the clock (time.Now if nil); tests inject a fake one.
	Now func() time.Time
	// ProducerIDExpiration is producer.id.expiration.ms: ExpireProducers drops producers
	// idle this long (1 day if zero).
	ProducerIDExpiration time.Duration
	// Logger receives recovery and truncation reports (slog.Default if nil).
	Logger *slog.Logger
}

// ZeroRetentionBytes is Options.RetentionBytes for Kafka's retention.bytes=0: the log keeps no
// bytes, so retention deletes every segment, the active one too (once it holds records below
// the high watermark). With any positive limit the active segment stays, as in Kafka: the log
// without it would hold 0 bytes, less than the limit.
const ZeroRetentionBytes int64 = math.MinInt64

// Defaults are Kafka's defaults for the settings above.
var Defaults = Options{
	SegmentBytes:       1 << 30,
	SegmentMs:          7 * 24 * time.Hour,
	IndexIntervalBytes: 4096,
	SegmentIndexBytes:  10 << 20,
	RetentionBytes:     -1,
	RetentionMs:        7 * 24 * time.Hour,
	FlushMessages:      math.MaxInt64,
	FlushMs:            -1,
	CheckpointInterval: time.Minute,
	WritebackBytes:     4 << 20,
	PreallocateBytes:   64 << 20,
	RetryBackoff:       time.Second,

	ProducerIDExpiration: 24 * time.Hour,
	RetryBackoffMax:      time.Minute,
}

func (o Options) withDefaults() Options {
	d := Defaults
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = d.SegmentBytes
	}
	o.SegmentBytes = min(o.SegmentBytes, math.MaxInt32)
	if o.ProducerIDExpiration <= 0 {
		o.ProducerIDExpiration = d.ProducerIDExpiration
	}
	if o.SegmentMs <= 0 {
		o.SegmentMs = d.SegmentMs
	}
	o.SegmentJitter = max(o.SegmentJitter, 0)
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if o.SegmentIndexBytes <= 0 {
		o.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if o.RetentionBytes == 0 {
		o.RetentionBytes = d.RetentionBytes
	}
	if o.RetentionMs == 0 {
		o.RetentionMs = d.RetentionMs
	}
	if o.FlushMessages <= 0 {
		o.FlushMessages = d.FlushMessages
	}
	if o.FlushMs == 0 {
		o.FlushMs = d.FlushMs
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = d.CheckpointInterval
	}
	if o.WritebackBytes == 0 {
		o.WritebackBytes = d.WritebackBytes
	}
	if o.PreallocateBytes == 0 {
		o.PreallocateBytes = d.PreallocateBytes
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = d.RetryBackoff
	}
	if o.RetryBackoffMax <= 0 {
		o.RetryBackoffMax = max(d.RetryBackoffMax, o.RetryBackoff)
	}
	o.RetryBackoffMax = max(o.RetryBackoffMax, o.RetryBackoff)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// mayReserve reports whether n more bytes may be reserved ahead (Options.Reserve).
func (o *Options) mayReserve(n int64) bool {
	return n <= 0 || o.Reserve == nil || o.Reserve(n)
}

// rollJitter draws a segment's share of SegmentJitter (Kafka's randomSegmentJitter): how much
// earlier than SegmentMs it rolls.
func (o *Options) rollJitter() time.Duration {
	j := min(o.SegmentJitter, o.SegmentMs)
	if j <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(j)))
}
