package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/batch"
)

// Replica comparison. The brokers are stopped; every replica's partition directory
// (<data dir>/<topic>-<partition>) is read as it lies on disk, read-only: the segment files
// (<20-digit base offset>.log) in base offset order, batch by batch, each batch's length,
// magic and CRC checked as log recovery checks them (batch.Batch.Validate). The package
// segment is not used: its Open recovers the log, writing to the directory (the recovery
// point, truncation of a torn tail, removal of leftovers), and a comparison must not change
// what it compares. A replica's log ends, as recovery would end it, at the first batch that
// is not whole and sound, or whose offsets do not follow the previous batch's.
//
// Only the batches below the high watermark are compared: from each log, the batches whose
// base offset is below it. Two batches agree when their base offset, last offset, partition
// leader epoch and CRC agree; a follower copies the leader's batches byte for byte, so any
// difference is a divergence.

// replicaBatch is what is compared of one batch.
type replicaBatch struct {
	base, last int64
	epoch      int32
	crc        uint32
}

func (b replicaBatch) String() string {
	return fmt.Sprintf("[%d, %d] epoch %d crc %#08x", b.base, b.last, b.epoch, b.crc)
}

// replicaLog is a replica's batches below the high watermark, and where its log ends.
type replicaLog struct {
	batches []replicaBatch
	// end is the offset after the last sound batch read (the log start when there is none).
	end int64
	// cut says why the log ended before the high watermark, if it did within a file (a
	// torn or corrupt batch); empty when the files simply ended.
	cut string
}

// CompareReplicas compares, for every partition of topics, each broker's log (read from the
// files under its data directory; the brokers are stopped) with the leader's, batch by batch
// (offsets, leader epoch, CRC) below hw, and lists where they differ. A replica whose log
// ends below hw is divergent only if it is in isr (a lagging replica outside it may be
// short, not different).
//
// The partitions compared are those of hw whose topic is in topics. Every replica of the
// partition (rs.Replicas; every broker of dataDirs where it lists none) is compared with the
// leader; one without a directory for the partition is divergent if it is in the ISR. A
// broker a move took the partition from is not compared: its log stopped where it left (and
// StaleReplicaData says whether it is gone). A leader whose own log ends below hw is listed
// as divergent from itself. A leader without a data directory in dataDirs, or a file that cannot be read, is an
// error (joined, naming the partition); the other partitions are still compared.
func CompareReplicas(dataDirs map[int32]string, topics []string, rs ReplicaState, hw map[TopicPartition]int64) ([]Divergence, error) {
	var out []Divergence
	var errs []error
	brokers := make([]int32, 0, len(dataDirs))
	for id := range dataDirs {
		brokers = append(brokers, id)
	}
	slices.Sort(brokers)
	for _, tp := range comparedPartitions(hw) {
		if !slices.Contains(topics, tp.Topic) {
			continue
		}
		replicas := brokers
		if r, ok := rs.Replicas[tp]; ok {
			replicas = slices.Sorted(slices.Values(r))
		}
		ds, err := comparePartition(dataDirs, replicas, tp, rs.Leaders, rs.ISR[tp], hw[tp])
		out = append(out, ds...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// StaleReplicaData lists the partition directories of topics that brokers of dataDirs keep
// for partitions of rs they are not a replica of: a move's old replica whose data was not
// deleted.
func StaleReplicaData(dataDirs map[int32]string, topics []string, rs ReplicaState) []string {
	var out []string
	parts := make(map[TopicPartition]int64, len(rs.Replicas))
	for tp := range rs.Replicas {
		parts[tp] = 0
	}
	for _, tp := range comparedPartitions(parts) {
		if !slices.Contains(topics, tp.Topic) {
			continue
		}
		for _, b := range slices.Sorted(maps.Keys(dataDirs)) {
			if slices.Contains(rs.Replicas[tp], b) {
				continue
			}
			if _, err := os.Stat(partitionDir(dataDirs[b], tp)); err == nil {
				out = append(out, fmt.Sprintf("broker %d keeps %s-%d's data (%s), not one of its replicas %v", b, tp.Topic, tp.Partition, partitionDir(dataDirs[b], tp), rs.Replicas[tp]))
			}
		}
	}
	return out
}

// comparePartition compares tp's replicas.
func comparePartition(dataDirs map[int32]string, brokers []int32, tp TopicPartition, leaders map[TopicPartition]int32,
	isr []int32, hw int64) ([]Divergence, error) {
	leader, ok := leaders[tp]
	if !ok || leader < 0 {
		return nil, fmt.Errorf("chaos: compare replicas of %s-%d: no leader known", tp.Topic, tp.Partition)
	}
	dir, ok := dataDirs[leader]
	if !ok {
		return nil, fmt.Errorf("chaos: compare replicas of %s-%d: no data directory for its leader, broker %d", tp.Topic, tp.Partition, leader)
	}
	lead, err := readReplicaLog(partitionDir(dir, tp), hw)
	if err != nil {
		return nil, fmt.Errorf("chaos: compare replicas of %s-%d: leader %d: %w", tp.Topic, tp.Partition, leader, err)
	}
	var out []Divergence
	div := func(broker int32, offset int64, detail string) {
		out = append(out, Divergence{TopicPartition: tp, Broker: broker, Leader: leader, Offset: offset, Detail: detail})
	}
	if lead.end < hw {
		div(leader, lead.end, fmt.Sprintf("the leader's log ends at %d, below the high watermark %d%s", lead.end, hw, cutNote(lead.cut)))
	}
	var errs []error
	for _, b := range brokers {
		if b == leader {
			continue
		}
		if _, ok := dataDirs[b]; !ok {
			errs = append(errs, fmt.Errorf("chaos: compare replicas of %s-%d: no data directory for its replica, broker %d", tp.Topic, tp.Partition, b))
			continue
		}
		inISR := slices.Contains(isr, b)
		rl, err := readReplicaLog(partitionDir(dataDirs[b], tp), hw)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if inISR {
				div(b, firstOffset(lead), "in the ISR but has no log of the partition")
			}
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("chaos: compare replicas of %s-%d: broker %d: %w", tp.Topic, tp.Partition, b, err))
			continue
		}
		if offset, detail, ok := compareLogs(lead, rl, hw, inISR); !ok {
			div(b, offset, detail)
		}
	}
	return out, errors.Join(errs...)
}

// compareLogs compares a replica's log with the leader's below hw: where they first differ,
// if they do. A replica that ends short (a prefix of the leader's log) differs only if inISR.
func compareLogs(lead, rl replicaLog, hw int64, inISR bool) (offset int64, detail string, ok bool) {
	outside := ""
	if !inISR {
		outside = " (outside the ISR)"
	}
	for i, lb := range lead.batches {
		if i >= len(rl.batches) {
			if !inISR {
				return 0, "", true // lagging, and allowed to
			}
			return rl.end, fmt.Sprintf("in the ISR but its log ends at %d, below the high watermark %d, where the leader has %v%s",
				rl.end, hw, lb, cutNote(rl.cut)), false
		}
		if rb := rl.batches[i]; rb != lb {
			return min(rb.base, lb.base), fmt.Sprintf("batch %v where the leader has %v%s", rb, lb, outside), false
		}
	}
	if len(rl.batches) > len(lead.batches) {
		// Only when the leader's log ends below hw (listed already): the replica has more
		// below hw than its leader.
		rb := rl.batches[len(lead.batches)]
		return rb.base, fmt.Sprintf("batch %v past the leader's log end %d%s", rb, lead.end, outside), false
	}
	return 0, "", true
}

func cutNote(cut string) string {
	if cut == "" {
		return ""
	}
	return " (" + cut + ")"
}

// firstOffset is the first offset of a log's batches, or its end when it has none.
func firstOffset(l replicaLog) int64 {
	if len(l.batches) > 0 {
		return l.batches[0].base
	}
	return l.end
}

// partitionDir is tp's directory under a broker's data directory.
func partitionDir(dataDir string, tp TopicPartition) string {
	return filepath.Join(dataDir, tp.Topic+"-"+strconv.Itoa(int(tp.Partition)))
}

// segmentLogs lists dir's segment log files, in base offset order.
func segmentLogs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type seg struct {
		base int64
		name string
	}
	var segs []seg
	for _, e := range ents {
		name := e.Name()
		stem, ok := strings.CutSuffix(name, ".log")
		if !ok || len(stem) != 20 || !e.Type().IsRegular() {
			continue
		}
		base, err := strconv.ParseInt(stem, 10, 64)
		if err != nil || base < 0 {
			continue
		}
		segs = append(segs, seg{base, name})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].base < segs[j].base })
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = filepath.Join(dir, s.name)
	}
	return out, nil
}

// readReplicaLog reads the batches of the partition directory dir whose base offset is below
// hw. A missing directory is an error matching fs.ErrNotExist.
func readReplicaLog(dir string, hw int64) (replicaLog, error) {
	files, err := segmentLogs(dir)
	if err != nil {
		return replicaLog{}, err
	}
	var rl replicaLog
	first := true
	var buf []byte
	for _, path := range files {
		if !first && rl.end >= hw {
			break
		}
		if first {
			// The log starts at its first segment's base (the records before it are gone).
			base, _ := strconv.ParseInt(strings.TrimSuffix(filepath.Base(path), ".log"), 10, 64)
			rl.end = base
		}
		cut, done, err := readSegment(path, hw, &rl, &buf)
		if err != nil {
			return rl, err
		}
		first = false
		if cut != "" {
			rl.cut = cut
			break
		}
		if done {
			break
		}
	}
	return rl, nil
}

// readSegment appends path's batches below hw to rl. It reports why the log ends inside this
// file (cut), or that hw was reached (done).
func readSegment(path string, hw int64, rl *replicaLog, buf *[]byte) (cut string, done bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 256<<10)
	name := filepath.Base(path)
	for pos := int64(0); ; {
		var hdr [batch.LengthFieldEnd]byte
		n, err := io.ReadFull(r, hdr[:])
		switch {
		case err == io.EOF:
			return "", false, nil
		case errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Sprintf("%s: a torn batch header at byte %d (%d bytes)", name, pos, n), false, nil
		case err != nil:
			return "", false, fmt.Errorf("reading %s: %w", path, err)
		}
		size, err := batch.SizeOf(hdr[:])
		if err != nil {
			return fmt.Sprintf("%s: byte %d: %v", name, pos, err), false, nil
		}
		if cap(*buf) < size {
			*buf = make([]byte, size)
		}
		b := (*buf)[:size]
		copy(b, hdr[:])
		if m, err := io.ReadFull(r, b[batch.LengthFieldEnd:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Sprintf("%s: a torn batch at byte %d (%d of %d bytes)", name, pos, batch.LengthFieldEnd+m, size), false, nil
			}
			return "", false, fmt.Errorf("reading %s: %w", path, err)
		}
		bt := batch.Batch(b)
		if err := bt.Validate(); err != nil {
			return fmt.Sprintf("%s: batch at byte %d: %v", name, pos, err), false, nil
		}
		rb := replicaBatch{base: int64(bt.BaseOffset()), last: int64(bt.LastOffset()), epoch: bt.PartitionLeaderEpoch(), crc: bt.CRC()}
		if rb.base < rl.end || rb.last < rb.base {
			return fmt.Sprintf("%s: batch at byte %d has offsets [%d, %d], after the log end %d", name, pos, rb.base, rb.last, rl.end), false, nil
		}
		if rb.base >= hw {
			return "", true, nil
		}
		rl.batches = append(rl.batches, rb)
		rl.end = rb.last + 1
		pos += int64(size)
	}
}

// comparedPartitions are the partitions of hw in topic and partition order.
func comparedPartitions(hw map[TopicPartition]int64) []TopicPartition {
	out := make([]TopicPartition, 0, len(hw))
	for tp := range hw {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
