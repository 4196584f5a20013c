package broker

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// A produce or fetch that found a partition just before its topic was deleted, and reaches its
// log while or after dropPartition closes it, gets UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers
// for a deleted topic, not KAFKA_STORAGE_ERROR (which a client takes for a disk failure and
// retries). A log stopped by a disk error still answers KAFKA_STORAGE_ERROR.
func TestRequestsReachingADeletedLog(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.LogRetryBackoff = time.Minute // the stopped log stays stopped while the test looks at it
	broken := filepath.Join(dir, "broken-0") + string(filepath.Separator)
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		if op == vfs.OpWrite && strings.HasPrefix(path, broken) && strings.HasSuffix(path, ".log") {
			return vfs.EIO
		}
		return nil
	}}
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "gone", 1)
	createTopic(t, c, "broken", 1)
	if p := produce(t, c, "gone", 0, wire.AcksLeader, records(t, "a")); p.ErrorCode != wire.NoError {
		t.Fatalf("produce before the delete: %v", p.ErrorCode)
	}

	// The reconciler drops the partition of a deleted topic; a request that looked the
	// partition up just before still holds it when it reaches the log. Putting the dropped
	// partition back in the map gives every request that view, deterministically.
	p := b.partition("gone", 0)
	b.dropPartition(p)
	b.mu.Lock()
	b.mu.partitions[p.tp] = p
	b.mu.Unlock()
	if got := produce(t, c, "gone", 0, wire.AcksLeader, records(t, "b")); got.ErrorCode != wire.ErrUnknownTopicOrPartition {
		t.Errorf("acks=1 produce to a deleted partition's log: %v, want UNKNOWN_TOPIC_OR_PARTITION", got.ErrorCode)
	}
	if got := produce(t, c, "gone", 0, wire.AcksAll, records(t, "c")); got.ErrorCode != wire.ErrUnknownTopicOrPartition {
		t.Errorf("acks=all produce to a deleted partition's log: %v, want UNKNOWN_TOPIC_OR_PARTITION", got.ErrorCode)
	}
	if got := fetchP(t, c, "gone", 0, 0, 0, 1); got.ErrorCode != wire.ErrUnknownTopicOrPartition {
		t.Errorf("fetch from a deleted partition's log: %v, want UNKNOWN_TOPIC_OR_PARTITION", got.ErrorCode)
	}

	// A disk error is still one, before and after it stopped the log.
	for i := range 2 {
		if got := produce(t, c, "broken", 0, wire.AcksLeader, records(t, "x")); got.ErrorCode != wire.ErrKafkaStorageError {
			t.Errorf("produce %d to a log with a failed disk: %v, want KAFKA_STORAGE_ERROR", i, got.ErrorCode)
		}
	}
	if err := b.partition("broken", 0).log().Err(); err == nil {
		t.Fatal("the failed write did not stop the log")
	}
}

// errorCode tells a deleted log from one closed for another reason: only the first is an
// unknown partition.
func TestErrorCodeOfClosedLogs(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want wire.ErrorCode
	}{
		{fmt.Errorf("append t-0: %w", segment.ErrDeleted), wire.ErrUnknownTopicOrPartition},
		{fmt.Errorf("append t-0: %w", segment.ErrClosed), wire.ErrKafkaStorageError},
		{fmt.Errorf("append t-0: %w: /d/t-0: %w", segment.ErrFailed, syscall.EIO), wire.ErrKafkaStorageError},
	} {
		if got := errorCode(tc.err); got != tc.want {
			t.Errorf("errorCode(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
