package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/batch"
)

// testBatch is one batch of a hand-built log: n records from base, stamped with epoch.
type testBatch struct {
	base  int64
	n     int
	epoch int32
	value string // the records' values' prefix: another value is another CRC
}

// writeTestLog writes batches as the segment files of dir/<topic>-<p>, a new segment at each
// base offset in rolls.
func writeTestLog(t *testing.T, dir string, tp TopicPartition, bs []testBatch, rolls ...int64) {
	t.Helper()
	pdir := partitionDir(dir, tp)
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var files [][]byte
	var bases []int64
	for i, tb := range bs {
		if i == 0 || containsInt64(rolls, tb.base) {
			files = append(files, nil)
			bases = append(bases, tb.base)
		}
		bld := batch.NewBuilder(batch.DefaultBuilderOptions())
		for j := range tb.n {
			bld.Append(&batch.Record{Timestamp: 1, Value: []byte(fmt.Sprintf("%s-%d", tb.value, j))})
		}
		b, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		b.SetBaseOffset(batch.Offset(tb.base))
		b.SetPartitionLeaderEpoch(tb.epoch)
		files[len(files)-1] = append(files[len(files)-1], b...)
	}
	for i, f := range files {
		if err := os.WriteFile(filepath.Join(pdir, fmt.Sprintf("%020d.log", bases[i])), f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func containsInt64(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestCompareReplicas: replica logs built by hand (three brokers, the leader 0, offsets 0-9
// in four batches over two segments) are compared below the high watermark: identical logs,
// and logs that differ only past it, find nothing; a replica with the same prefix and one
// batch of another epoch, or other bytes (another CRC), is divergent at that batch's offset;
// an ISR member that ends short is divergent where it ends, a lagging replica outside the
// ISR is not; a torn tail ends a log where recovery would; the files are left as they were.
func TestCompareReplicas(t *testing.T) {
	tp := TopicPartition{Topic: "chaos-0", Partition: 1}
	good := []testBatch{{0, 3, 0, "a"}, {3, 2, 0, "b"}, {5, 4, 1, "c"}, {9, 1, 1, "d"}}
	leaders := map[TopicPartition]int32{tp: 0}
	allISR := map[TopicPartition][]int32{tp: {0, 1, 2}}
	hw := map[TopicPartition]int64{tp: 10}

	t.Run("identical", func(t *testing.T) {
		dirs := map[int32]string{0: t.TempDir(), 1: t.TempDir(), 2: t.TempDir()}
		writeTestLog(t, dirs[0], tp, good, 5)
		writeTestLog(t, dirs[1], tp, good, 5)
		// Broker 2 rolled its segments elsewhere: the files differ, the batches do not.
		writeTestLog(t, dirs[2], tp, good, 3, 9)
		ds, err := CompareReplicas(dirs, []string{"chaos-0"}, ReplicaState{Leaders: leaders, ISR: allISR}, hw)
		if err != nil || len(ds) != 0 {
			t.Fatalf("identical logs: %+v, %v", ds, err)
		}
	})

	t.Run("different past the HW", func(t *testing.T) {
		dirs := map[int32]string{0: t.TempDir(), 1: t.TempDir()}
		writeTestLog(t, dirs[0], tp, good)
		writeTestLog(t, dirs[1], tp, append(good[:3:3], testBatch{9, 1, 2, "x"}))
		ds, err := CompareReplicas(dirs, []string{"chaos-0"}, ReplicaState{Leaders: leaders, ISR: allISR}, map[TopicPartition]int64{tp: 9})
		if err != nil || len(ds) != 0 {
			t.Fatalf("logs differing at the HW: %+v, %v", ds, err)
		}
	})

	for _, tc := range []struct {
		name    string
		replica []testBatch
		isr     []int32
		offset  int64 // -1: no divergence
		detail  string
	}{
		{"other epoch", []testBatch{good[0], good[1], {5, 4, 2, "c"}, good[3]}, []int32{0, 1}, 5, "epoch 2 crc"},
		{"other bytes", []testBatch{good[0], {3, 2, 0, "B"}, good[2], good[3]}, []int32{0, 1}, 3, "batch [3, 4] epoch 0"},
		{"other batch boundaries", []testBatch{good[0], good[1], {5, 2, 1, "c"}, {7, 3, 1, "c"}}, []int32{0, 1}, 5, "batch [5, 6]"},
		{"other bytes outside the ISR", []testBatch{good[0], {3, 2, 0, "B"}}, []int32{0}, 3, "outside the ISR"},
		{"short in the ISR", good[:2], []int32{0, 1}, 5, "in the ISR but its log ends at 5, below the high watermark 10"},
		{"short outside the ISR", good[:2], []int32{0}, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirs := map[int32]string{0: t.TempDir(), 1: t.TempDir()}
			writeTestLog(t, dirs[0], tp, good, 5)
			writeTestLog(t, dirs[1], tp, tc.replica, 5)
			ds, err := CompareReplicas(dirs, []string{"chaos-0"}, ReplicaState{Leaders: leaders, ISR: map[TopicPartition][]int32{tp: tc.isr}}, hw)
			if err != nil {
				t.Fatal(err)
			}
			if tc.offset < 0 {
				if len(ds) != 0 {
					t.Fatalf("divergences %+v, want none", ds)
				}
				return
			}
			if len(ds) != 1 || ds[0].Broker != 1 || ds[0].Leader != 0 || ds[0].TopicPartition != tp || ds[0].Offset != tc.offset ||
				!strings.Contains(ds[0].Detail, tc.detail) {
				t.Fatalf("divergences %+v, want broker 1 at offset %d saying %q", ds, tc.offset, tc.detail)
			}
		})
	}

	t.Run("torn tail", func(t *testing.T) {
		dirs := map[int32]string{0: t.TempDir(), 1: t.TempDir()}
		writeTestLog(t, dirs[0], tp, good)
		writeTestLog(t, dirs[1], tp, good)
		// Broker 1's last batch (offset 9) loses its last byte: its log ends at 9.
		path := filepath.Join(partitionDir(dirs[1], tp), fmt.Sprintf("%020d.log", 0))
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, fi.Size()-1); err != nil {
			t.Fatal(err)
		}
		ds, err := CompareReplicas(dirs, []string{"chaos-0"}, ReplicaState{Leaders: leaders, ISR: allISR}, hw)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || ds[0].Broker != 1 || ds[0].Offset != 9 || !strings.Contains(ds[0].Detail, "torn batch") {
			t.Fatalf("torn tail: %+v", ds)
		}
		if fi2, err := os.Stat(path); err != nil || fi2.Size() != fi.Size()-1 {
			t.Fatalf("the compared file changed: %v, %v", fi2.Size(), err)
		}
	})

	t.Run("missing replica and short leader", func(t *testing.T) {
		dirs := map[int32]string{0: t.TempDir(), 1: t.TempDir(), 2: t.TempDir()}
		writeTestLog(t, dirs[0], tp, good[:3]) // the leader ends at 9, below the HW 10
		writeTestLog(t, dirs[1], tp, good)     // more than its leader below the HW
		// Broker 2 has no directory for the partition, and is in the ISR.
		ds, err := CompareReplicas(dirs, []string{"chaos-0"}, ReplicaState{Leaders: leaders, ISR: allISR}, hw)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			broker int32
			offset int64
			detail string
		}{{0, 9, "the leader's log ends at 9"}, {1, 9, "past the leader's log end 9"}, {2, 0, "no log of the partition"}}
		if len(ds) != len(want) {
			t.Fatalf("divergences %+v, want %d", ds, len(want))
		}
		for i, w := range want {
			if ds[i].Broker != w.broker || ds[i].Offset != w.offset || !strings.Contains(ds[i].Detail, w.detail) {
				t.Errorf("divergence %d: %+v, want broker %d at %d saying %q", i, ds[i], w.broker, w.offset, w.detail)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		dirs := map[int32]string{0: t.TempDir()}
		if _, err := CompareReplicas(dirs, []string{"chaos-0"}, ReplicaState{Leaders: map[TopicPartition]int32{tp: 7}, ISR: allISR}, hw); err == nil ||
			!strings.Contains(err.Error(), "no data directory for its leader, broker 7") {
			t.Fatalf("unknown leader: %v", err)
		}
		// A partition of another topic is not compared.
		if ds, err := CompareReplicas(dirs, []string{"chaos-9"}, ReplicaState{Leaders: leaders, ISR: allISR}, hw); err != nil || len(ds) != 0 {
			t.Fatalf("other topic: %+v, %v", ds, err)
		}
	})
}

// TestCompareReplicasFollowsTheReplicaList: a broker a move took the partition from is not
// compared (its log, divergent here, stopped where it left), and its directory left behind
// is named by StaleReplicaData; a replica the list names without a directory is divergent.
func TestCompareReplicasFollowsTheReplicaList(t *testing.T) {
	tp := TopicPartition{Topic: "chaos-0", Partition: 0}
	good := []testBatch{{0, 3, 0, "a"}, {3, 2, 1, "b"}}
	hw := map[TopicPartition]int64{tp: 5}
	dirs := map[int32]string{0: t.TempDir(), 1: t.TempDir(), 2: t.TempDir()}
	writeTestLog(t, dirs[0], tp, good)
	writeTestLog(t, dirs[1], tp, good)
	writeTestLog(t, dirs[2], tp, []testBatch{good[0], {3, 2, 0, "x"}}) // the old replica
	rs := ReplicaState{Leaders: map[TopicPartition]int32{tp: 1}, Replicas: map[TopicPartition][]int32{tp: {1, 0}}, ISR: map[TopicPartition][]int32{tp: {1, 0}}}
	ds, err := CompareReplicas(dirs, []string{"chaos-0"}, rs, hw)
	if err != nil || len(ds) != 0 {
		t.Fatalf("replicas [1 0] compared: %+v, %v; want no divergence (broker 2 is no replica)", ds, err)
	}
	stale := StaleReplicaData(dirs, []string{"chaos-0"}, rs)
	if len(stale) != 1 || !strings.HasPrefix(stale[0], "broker 2 keeps chaos-0-0's data") {
		t.Fatalf("stale data %q, want broker 2's", stale)
	}
	if err := os.RemoveAll(partitionDir(dirs[2], tp)); err != nil {
		t.Fatal(err)
	}
	if stale := StaleReplicaData(dirs, []string{"chaos-0"}, rs); len(stale) != 0 {
		t.Fatalf("stale data %q after broker 2's was deleted", stale)
	}
	rs.Replicas[tp], rs.ISR[tp] = []int32{1, 2}, []int32{1, 2}
	ds, err = CompareReplicas(dirs, []string{"chaos-0"}, rs, hw)
	if err != nil || len(ds) != 1 || ds[0].Broker != 2 || !strings.Contains(ds[0].Detail, "no log of the partition") {
		t.Fatalf("replicas [1 2] with broker 2's log gone: %+v, %v", ds, err)
	}
}
