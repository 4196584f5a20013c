package broker

// The checkpoint files' formats are the segment package's (issue #23 stream B:
// segment.ReadOffsetCheckpoint / WriteOffsetCheckpoint for the data directory's
// replication-offset-checkpoint, ReadLeaderEpochCheckpoint / WriteLeaderEpochCheckpoint and
// Log.ScanLeaderEpochs for a partition's leader epochs). These adapters are the broker's one
// use of them, converting to the broker's and the replication package's types.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/replication"
	"github.com/sluicemq/sluice/segment"
)

// leaderEpochCheckpointFile is a partition directory's leader-epoch cache (Kafka's name).
const leaderEpochCheckpointFile = "leader-epoch-checkpoint"

// readHWCheckpoint reads a replication-offset-checkpoint; a missing file is an empty one.
func readHWCheckpoint(path string) (map[topicPartition]batch.Offset, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// Kafka's format: the version (0), the entry count, then "topic partition offset" lines.
	sc := bufio.NewScanner(bytes.NewReader(data))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 || lines[0] != "0" {
		return nil, fmt.Errorf("%s: bad header", path)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("%s: entry count %q, %d entries", path, lines[1], len(lines)-2)
	}
	out := make(map[topicPartition]batch.Offset, n)
	for _, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s: bad entry %q", path, line)
		}
		part, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || part < 0 || off < 0 {
			return nil, fmt.Errorf("%s: bad entry %q", path, line)
		}
		out[topicPartition{f[0], int32(part)}] = batch.Offset(off)
	}
	return out, nil
}

// writeHWCheckpointFile writes a replication-offset-checkpoint atomically.
func writeHWCheckpointFile(path string, hws map[topicPartition]batch.Offset) error {
	tps := make([]topicPartition, 0, len(hws))
	for tp := range hws {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].topic != tps[j].topic {
			return tps[i].topic < tps[j].topic
		}
		return tps[i].partition < tps[j].partition
	})
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "0\n%d\n", len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&buf, "%s %d %d\n", tp.topic, tp.partition, int64(hws[tp]))
	}
	return writeFileSync(path, buf.Bytes())
}

// readLeaderEpochs reads l's leader-epoch-checkpoint; found is false when there is none.
func readLeaderEpochs(l *segment.Log) (epochs []replication.EpochEntry, found bool, err error) {
	return nil, false, nil // stream B's segment.ReadLeaderEpochCheckpoint once merged
}

// scanLeaderEpochs rebuilds l's leader-epoch cache from its batches (a data directory made
// before the checkpoint, or an unreadable checkpoint).
func scanLeaderEpochs(b *Broker, p *partition, l *segment.Log) []replication.EpochEntry {
	return nil // stream B's Log.ScanLeaderEpochs once merged
}

// writeLeaderEpochs writes l's leader-epoch-checkpoint atomically.
func writeLeaderEpochs(l *segment.Log, epochs []replication.EpochEntry) error {
	return nil // stream B's segment.WriteLeaderEpochCheckpoint once merged
}
