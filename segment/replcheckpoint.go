package segment

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// The replication checkpoints, in Kafka's text formats so that its tools and habits carry over:
//
//	leader-epoch-checkpoint          (one per partition directory)
//	0                                version
//	<count>                          number of lines that follow
//	<epoch> <start offset>           one per leader epoch, epochs increasing, offsets non-decreasing
//
//	replication-offset-checkpoint    (one per data directory: the high watermarks)
//	0
//	<count>
//	<topic> <partition> <offset>     one per partition, in no particular order
//
// Both are replaced atomically (vfs.WriteFileAtomic), so a reader finds the old file or the new
// one, and a crash between the write of the ".tmp" and its rename keeps the old one. One offset
// file per data directory, not per partition, because 3,000 partitions each fsyncing its own
// file every replica.high.watermark.checkpoint.interval.ms would be 600 fsyncs a second for
// nothing. The segment package owns the formats; the replication state lives in the broker,
// which converts (segment cannot import replication).

const (
	// LeaderEpochCheckpointFile is the leader-epoch checkpoint's name in a partition directory.
	LeaderEpochCheckpointFile = "leader-epoch-checkpoint"
	// OffsetCheckpointFile is the conventional name of the high-watermark checkpoint in a data
	// directory (Kafka's).
	OffsetCheckpointFile = "replication-offset-checkpoint"

	checkpointFormatVersion = 0
	// maxCheckpointFileBytes bounds what a reader loads: a million partitions' lines, far
	// beyond any broker's, and well below what would hurt to allocate.
	maxCheckpointFileBytes = 256 << 20
	// maxTopicLen is Kafka's limit on a topic name.
	maxTopicLen = 249
)

// EpochStart is one entry of the leader-epoch cache: the first offset written at Epoch.
type EpochStart struct {
	Epoch       int32
	StartOffset batch.Offset
}

// TopicPartition names one partition: the key of the replication-offset checkpoint.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String returns "topic-partition", as Kafka prints it.
func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

// BadCheckpointError reports a checkpoint file that does not parse; it wraps ErrBadCheckpoint.
// Line is 1-based; 0 means the file as a whole (its size, a missing line).
type BadCheckpointError struct {
	Path   string
	Line   int
	Reason string
}

func (e *BadCheckpointError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%v: %s: %s", ErrBadCheckpoint, e.Path, e.Reason)
	}
	return fmt.Sprintf("%v: %s line %d: %s", ErrBadCheckpoint, e.Path, e.Line, e.Reason)
}

func (e *BadCheckpointError) Unwrap() error { return ErrBadCheckpoint }

// WriteLeaderEpochCheckpoint replaces dir's leader-epoch-checkpoint with entries, which must
// have increasing epochs >= 0 and non-decreasing start offsets >= 0 (what the reader accepts).
func WriteLeaderEpochCheckpoint(fsys vfs.FS, dir string, entries []EpochStart) error {
	for i, e := range entries {
		if err := checkEpochEntry(entries, i); err != "" {
			return fmt.Errorf("segment: write leader-epoch checkpoint in %s: entry %d (%d %d): %s", dir, i, e.Epoch, e.StartOffset, err)
		}
	}
	b := make([]byte, 0, 16+len(entries)*24)
	b = appendCheckpointHeader(b, len(entries))
	for _, e := range entries {
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(e.StartOffset), 10)
		b = append(b, '\n')
	}
	if err := vfs.WriteFileAtomic(fsys, filepath.Join(dir, LeaderEpochCheckpointFile), b); err != nil {
		return fmt.Errorf("segment: write leader-epoch checkpoint: %w", err)
	}
	return nil
}

// ReadLeaderEpochCheckpoint reads dir's leader-epoch-checkpoint: nil, nil if there is none (a
// directory made before leader epochs: ScanLeaderEpochs rebuilds them), an empty non-nil slice
// for a file of no entries, a *BadCheckpointError if it does not parse.
func ReadLeaderEpochCheckpoint(fsys vfs.FS, dir string) ([]EpochStart, error) {
	path := filepath.Join(dir, LeaderEpochCheckpointFile)
	data, err := readCheckpointFile(fsys, path)
	if data == nil || err != nil {
		return nil, err
	}
	return parseLeaderEpochCheckpoint(path, data)
}

// checkEpochEntry says what is wrong with entries[i] given those before it, or "".
func checkEpochEntry(entries []EpochStart, i int) string {
	e := entries[i]
	switch {
	case e.Epoch < 0:
		return "negative epoch"
	case e.StartOffset < 0:
		return "negative start offset"
	case i > 0 && e.Epoch <= entries[i-1].Epoch:
		return "epoch not above the previous one"
	case i > 0 && e.StartOffset < entries[i-1].StartOffset:
		return "start offset below the previous one"
	}
	return ""
}

func parseLeaderEpochCheckpoint(path string, data []byte) ([]EpochStart, error) {
	lines, err := checkpointLines(path, data)
	if err != nil {
		return nil, err
	}
	entries := make([]EpochStart, 0, len(lines))
	for i, line := range lines {
		bad := func(reason string) error { return &BadCheckpointError{Path: path, Line: i + 3, Reason: reason} }
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, bad(fmt.Sprintf("%d fields, want 2 (epoch, start offset)", len(f)))
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		start, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, bad("not a number")
		}
		entries = append(entries, EpochStart{Epoch: int32(epoch), StartOffset: batch.Offset(start)})
		if reason := checkEpochEntry(entries, i); reason != "" {
			return nil, bad(reason)
		}
	}
	return entries, nil
}

// WriteOffsetCheckpoint replaces the replication-offset checkpoint at path with m. Topics must
// be valid Kafka topic names (no whitespace), partitions and offsets >= 0. Lines are written in
// (topic, partition) order, so equal maps give equal files.
func WriteOffsetCheckpoint(fsys vfs.FS, path string, m map[TopicPartition]batch.Offset) error {
	keys := make([]TopicPartition, 0, len(m))
	for tp, off := range m {
		if reason := checkOffsetEntry(tp, off); reason != "" {
			return fmt.Errorf("segment: write offset checkpoint %s: %s %d: %s", path, tp, off, reason)
		}
		keys = append(keys, tp)
	}
	slices.SortFunc(keys, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	b := make([]byte, 0, 16+len(keys)*48)
	b = appendCheckpointHeader(b, len(keys))
	for _, tp := range keys {
		b = append(b, tp.Topic...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(tp.Partition), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(m[tp]), 10)
		b = append(b, '\n')
	}
	if err := vfs.WriteFileAtomic(fsys, path, b); err != nil {
		return fmt.Errorf("segment: write offset checkpoint: %w", err)
	}
	return nil
}

// ReadOffsetCheckpoint reads the replication-offset checkpoint at path: nil, nil if there is
// none, an empty non-nil map for a file of no entries, a *BadCheckpointError if it does not parse (a partition listed twice included).
func ReadOffsetCheckpoint(fsys vfs.FS, path string) (map[TopicPartition]batch.Offset, error) {
	data, err := readCheckpointFile(fsys, path)
	if data == nil || err != nil {
		return nil, err
	}
	return parseOffsetCheckpoint(path, data)
}

func checkOffsetEntry(tp TopicPartition, off batch.Offset) string {
	switch {
	case tp.Topic == "" || len(tp.Topic) > maxTopicLen:
		return "bad topic length"
	case strings.ContainsFunc(tp.Topic, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "whitespace or control character in topic"
	case tp.Partition < 0:
		return "negative partition"
	case off < 0:
		return "negative offset"
	}
	return ""
}

func parseOffsetCheckpoint(path string, data []byte) (map[TopicPartition]batch.Offset, error) {
	lines, err := checkpointLines(path, data)
	if err != nil {
		return nil, err
	}
	m := make(map[TopicPartition]batch.Offset, len(lines))
	for i, line := range lines {
		bad := func(reason string) error { return &BadCheckpointError{Path: path, Line: i + 3, Reason: reason} }
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, bad(fmt.Sprintf("%d fields, want 3 (topic, partition, offset)", len(f)))
		}
		part, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, bad("not a number")
		}
		tp := TopicPartition{Topic: f[0], Partition: int32(part)}
		if reason := checkOffsetEntry(tp, batch.Offset(off)); reason != "" {
			return nil, bad(reason)
		}
		if _, dup := m[tp]; dup {
			return nil, bad("partition " + tp.String() + " listed twice")
		}
		m[tp] = batch.Offset(off)
	}
	return m, nil
}

func appendCheckpointHeader(b []byte, count int) []byte {
	b = strconv.AppendInt(b, checkpointFormatVersion, 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, int64(count), 10)
	return append(b, '\n')
}

// readCheckpointFile returns the file's bytes, or nil, nil if it does not exist. The size is
// bounded before anything is allocated.
func readCheckpointFile(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, errNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("segment: read checkpoint: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("segment: read checkpoint %s: %w", path, err)
	}
	if size > maxCheckpointFileBytes {
		return nil, &BadCheckpointError{Path: path, Reason: fmt.Sprintf("%d bytes, more than %d", size, maxCheckpointFileBytes)}
	}
	data := make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("segment: read checkpoint %s: %w", path, err)
	}
	if n < len(data) {
		return nil, fmt.Errorf("segment: read checkpoint %s: %w", path, io.ErrUnexpectedEOF)
	}
	return data, nil
}

// checkpointLines checks the version and count lines and returns the entry lines, exactly
// count of them (the last one's newline may be missing, as Kafka's reader allows).
func checkpointLines(path string, data []byte) ([]string, error) {
	s := strings.TrimSuffix(string(data), "\n")
	version, rest, ok1 := strings.Cut(s, "\n")
	countLine, body, ok2 := strings.Cut(rest, "\n")
	if !ok1 {
		return nil, &BadCheckpointError{Path: path, Line: 2, Reason: "missing count line"}
	}
	if strings.TrimSpace(version) != strconv.Itoa(checkpointFormatVersion) {
		return nil, &BadCheckpointError{Path: path, Line: 1, Reason: fmt.Sprintf("version %.20q, want %d", version, checkpointFormatVersion)}
	}
	// The count cannot exceed the lines present, which the size bound already bounds: it is
	// checked against them before anything is allocated from it.
	count, err := strconv.Atoi(strings.TrimSpace(countLine))
	if err != nil || count < 0 {
		return nil, &BadCheckpointError{Path: path, Line: 2, Reason: fmt.Sprintf("count %.20q", countLine)}
	}
	if !ok2 {
		body = ""
		if count > 0 {
			return nil, &BadCheckpointError{Path: path, Line: 3, Reason: fmt.Sprintf("%d entries announced, 0 present", count)}
		}
		return nil, nil
	}
	if n := strings.Count(body, "\n") + 1; n != count {
		return nil, &BadCheckpointError{Path: path, Reason: fmt.Sprintf("%d entries announced, %d present", count, n)}
	}
	return strings.Split(body, "\n"), nil
}
