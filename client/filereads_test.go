//go:build unix

package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// fileReadValue is record i's value in partition p: 1 KiB that no codec shrinks, different for
// every record.
func fileReadValue(p int32, i int) []byte {
	v := make([]byte, 1024)
	r := rand.New(rand.NewPCG(uint64(p), uint64(i)))
	for j := range v {
		v[j] = byte(r.Uint32())
	}
	return v
}

// fillForFileReads appends to partition p batches of the given sizes (records per batch),
// alternating uncompressed and lz4 batches, and returns how many records it appended.
func fillForFileReads(f *consumerFixture, topic string, p int32, sizes ...int) int {
	n := 0
	for bi, size := range sizes {
		recs := make([]batch.Record, size)
		for i := range recs {
			recs[i] = batch.Record{Timestamp: time.Now().UnixMilli(), Key: fmt.Appendf(nil, "k%d", n+i), Value: fileReadValue(p, n+i),
				Headers: []batch.Header{{Key: []byte("h"), Value: fmt.Appendf(nil, "%d", n+i)}}}
		}
		codec := batch.None
		if bi%2 == 1 {
			codec = batch.LZ4
		}
		f.produce(topic, p, codec, recs)
		n += size
	}
	return n
}

// batchesOf10 is the sizes of n batches of 10 records, for fillForFileReads.
func batchesOf10(n int) []int {
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = 10
	}
	return sizes
}

// checkPartitionRecords checks that recs hold partition p's records from offset from to the
// end, in order, each with its key, value and header.
func checkPartitionRecords(t *testing.T, recs []client.Record, p int32, from, n int) {
	t.Helper()
	if len(recs) != n-from {
		t.Fatalf("partition %d: %d records, want %d", p, len(recs), n-from)
	}
	for i, r := range recs {
		want := from + i
		if r.Offset != int64(want) || !bytes.Equal(r.Value, fileReadValue(p, want)) || string(r.Key) != fmt.Sprintf("k%d", want) ||
			len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprint(want) {
			t.Fatalf("partition %d record %d: offset %d key %q value %x... headers %v", p, i, r.Offset, r.Key, r.Value[:min(8, len(r.Value))], r.Headers)
		}
	}
}

// byPartition splits records by partition, in order.
func byPartition(recs []client.Record) map[int32][]client.Record {
	out := map[int32][]client.Record{}
	for _, r := range recs {
		out[r.Partition] = append(out[r.Partition], r)
	}
	return out
}

// A consumer over the unix socket reads a partition's backlog from the broker's files, in
// pieces (twice max.partition.fetch.bytes: spanPieceLocked) that end in the middle of batches,
// with compressed batches and a batch larger than a piece among them, and delivers exactly the log: the same
// records as a consumer that fetches them (FileReads off), which reads nothing from the files.
// A small partition beside it comes inline. A max.partition.fetch.bytes smaller than a batch
// header still reads the first batch whole, as a fetch returns it.
func TestFileReadsDeliverTheLog(t *testing.T) {
	for _, mode := range consumerModes {
		t.Run(mode.name, func(t *testing.T) {
			f := newConsumerFixture(t)
			topic := "files-" + mode.name
			f.createTopic(topic, 2)
			sizes := []int{10, 10, 10, 100, 10} // the 100-record batch (100 KiB) is larger than a piece
			for range 10 {
				sizes = append(sizes, 10, 7, 13)
			}
			n0 := fillForFileReads(f, topic, 0, sizes...)
			n1 := fillForFileReads(f, topic, 1, 3, 3)
			tps := []client.TopicPartition{{Topic: topic, Partition: 0}, {Topic: topic, Partition: 1}}

			for _, run := range []struct {
				reads bool
				piece int
			}{{true, 32 << 10}, {false, 32 << 10}, {true, 1}} { // pieces of 64 KiB; 1: a piece too short for a batch header
				reads := run.reads
				c := f.consumer(client.ConsumerConfig{
					Config:                 client.Config{Brokers: []string{f.unix()}},
					AutoOffsetReset:        client.OffsetResetEarliest,
					MaxPartitionFetchBytes: run.piece,
					ReuseRecordBuffers:     mode.reuse,
					FileReads:              &reads,
				}, tps...)
				parts := byPartition(f.pollN(c, n0+n1))
				checkPartitionRecords(t, parts[0], 0, 0, n0)
				checkPartitionRecords(t, parts[1], 1, 0, n1)
				st := c.Stats()
				if reads && (st.FileReads < 5 || st.FileReadBytes < int64(n0)*1000) {
					t.Errorf("file reads on: %+v, want the backlog of partition 0 read from its file in pieces", st)
				}
				if !reads && (st.FileReads != 0 || st.FileReadBytes != 0) {
					t.Errorf("file reads off: %+v, want nothing read from files", st)
				}
				if st.Fetches == 0 {
					t.Errorf("stats %+v: no fetches counted", st)
				}
				_ = c.Close(context.Background())
			}
		})
	}
}

// A seek while a partition is being read from a file drops what was read ahead: the records
// after the seek start exactly at the new position, backwards and forwards.
func TestFileReadsSeek(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("files-seek", 1)
	n := fillForFileReads(f, "files-seek", 0, batchesOf10(60)...)
	tp := client.TopicPartition{Topic: "files-seek"}
	c := f.consumer(client.ConsumerConfig{
		Config: client.Config{Brokers: []string{f.unix()}}, AutoOffsetReset: client.OffsetResetEarliest,
		MaxPartitionFetchBytes: 32 << 10, ReuseRecordBuffers: true, MaxPollRecords: 5,
	}, tp)
	checkPartitionRecords(t, f.pollN(c, 100), 0, 0, 100)
	if c.Stats().FileReads == 0 {
		t.Fatal("no file reads before the seek")
	}
	if err := c.Seek(tp, 5); err != nil {
		t.Fatal(err)
	}
	checkPartitionRecords(t, f.pollN(c, 200), 0, 5, 205)
	if err := c.Seek(tp, 450); err != nil {
		t.Fatal(err)
	}
	checkPartitionRecords(t, f.pollN(c, n-450), 0, 450, n)
}

// Records that retention deletes while a consumer reads their segment from its file stop
// coming: the consumer notices that the file lost its name, fetches, meets
// OFFSET_OUT_OF_RANGE and resets, as a consumer that fetches through the socket would. Only
// the pieces already read ahead (at most maxSpanAhead, and the ones in hand) are still delivered. (The
// open file would still read: without the check the rest of the deleted segment would come.)
func TestFileReadsStopAtDeletedSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := brokertest.Config(dir, "127.0.0.1:0")
	cfg.RetentionCheck = 20 * time.Millisecond
	b := brokertest.Open(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := client.NewAdmin(ctx, b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const topic = "files-retention"
	if err := admin.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 1, Configs: map[string]string{"segment.bytes": "524288"}}); err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(ctx, b.Addr().String(), "fill")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f := &consumerFixture{t: t, b: b, conn: conn, ctx: ctx}
	// About 2 MiB in 10 KiB batches: four segments and the active one.
	n := fillForFileReads(f, topic, 0, batchesOf10(200)...)

	tp := client.TopicPartition{Topic: topic}
	c := f.consumer(client.ConsumerConfig{
		Config: client.Config{Brokers: []string{f.unix()}}, AutoOffsetReset: client.OffsetResetEarliest,
		MaxPartitionFetchBytes: 16 << 10, ReuseRecordBuffers: true, MaxPollRecords: 1,
	}, tp)
	first := f.pollN(c, 20)
	checkPartitionRecords(t, first, 0, 0, 20)
	if c.Stats().FileReads == 0 {
		t.Fatal("the first segment is not being read from its file")
	}

	if err := admin.AlterTopicConfigs(ctx, topic, map[string]string{"retention.bytes": "600000"}, nil); err != nil {
		t.Fatal(err)
	}
	var start int64
	for start == 0 {
		var lo wire.ListOffsetsResponse
		if err := conn.Call(ctx, &wire.ListOffsetsRequest{ReplicaID: wire.ConsumerReplicaID, Topics: []wire.ListOffsetsRequestTopic{
			{Topic: topic, Partitions: []wire.ListOffsetsRequestPartition{{CurrentLeaderEpoch: -1, Timestamp: wire.EarliestTimestamp}}}}}, &lo); err != nil {
			t.Fatal(err)
		}
		if start = lo.Topics[0].Partitions[0].Offset; start == 0 {
			if ctx.Err() != nil {
				t.Fatal("retention never deleted the first segment")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := os.Stat(fmt.Sprintf("%s/%s-0/%020d.log", dir, topic, 0)); !os.IsNotExist(err) {
		t.Fatalf("the first segment's file is still there (%v)", err)
	}

	var stale int
	recs := f.pollN(c, 1)
	for ; recs[0].Offset < start; recs = f.pollN(c, 1) {
		stale++
	}
	// What was read ahead before the deletion may still come: up to maxSpanAhead (4) pieces of
	// 32 KiB (twice max.partition.fetch.bytes) queued, three 10-record batches each, and the
	// rest of the one Poll is in, 130 records at most (100 to 130 were seen); the rest of the
	// 512 KiB segment (about 470 records) must not.
	if stale > 150 {
		t.Errorf("%d records of the deleted segment delivered after it was deleted", stale)
	}
	if recs[0].Offset < start {
		t.Fatalf("record at offset %d, below the log start %d", recs[0].Offset, start)
	}
	rest := append(recs, f.pollN(c, n-int(recs[0].Offset)-1)...)
	checkPartitionRecords(t, rest, 0, int(recs[0].Offset), n)
}

// A partition read from a file and one at the log's tail, in one fetcher: while the first has
// pieces waiting for a slow application, the second's new records still arrive, the fetcher
// does not poll the broker in a loop, and both partitions come whole and in order.
func TestFileReadsBesideATailPartition(t *testing.T) {
	f := newConsumerFixture(t)
	const topic = "files-mixed"
	f.createTopic(topic, 2)
	n0 := fillForFileReads(f, topic, 0, batchesOf10(100)...)
	tps := []client.TopicPartition{{Topic: topic, Partition: 0}, {Topic: topic, Partition: 1}}
	c := f.consumer(client.ConsumerConfig{
		Config: client.Config{Brokers: []string{f.unix()}}, AutoOffsetReset: client.OffsetResetEarliest,
		MaxPartitionFetchBytes: 32 << 10, MaxPollRecords: 10, FetchMaxWait: 200 * time.Millisecond,
	}, tps...)

	const n1 = 30
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := range n1 {
			recs := []batch.Record{{Timestamp: time.Now().UnixMilli(), Key: fmt.Appendf(nil, "k%d", i), Value: fileReadValue(1, i),
				Headers: []batch.Header{{Key: []byte("h"), Value: fmt.Appendf(nil, "%d", i)}}}}
			f.produce(topic, 1, batch.None, recs)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var got []client.Record
	for len(got) < n0+n1 {
		recs, err := c.Poll(f.ctx)
		if err != nil {
			t.Fatalf("poll after %d records: %v", len(got), err)
		}
		for _, r := range recs {
			got = append(got, cloneRecord(r))
		}
		time.Sleep(200 * time.Microsecond) // a slow application: partition 0's pieces pile up
	}
	<-produced
	parts := byPartition(got)
	checkPartitionRecords(t, parts[0], 0, 0, n0)
	checkPartitionRecords(t, parts[1], 1, 0, n1)
	// About 15 requests in all; a fetcher that polled partition 1 in a loop while partition
	// 0's pieces waited made 650 to 900.
	if st := c.Stats(); st.FileReads == 0 || st.Fetches > 200 {
		t.Errorf("stats %+v: want partition 0 read from its file, and no fetch loop", st)
	}
}

// openFiles counts the descriptors of this process open on paths ending in suffix (Linux's
// /proc/self/fd); ok is false where there is no such directory.
func openFiles(suffix string) (n int, ok bool) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasSuffix(l, suffix) {
			n++
		}
	}
	return n, true
}

// Unassigning a partition read from a file closes the file at once, although nothing wakes
// the partition's fetcher (no other partition of its broker is assigned, and Poll has
// nothing to poll): left open until Close, it kept a segment that retention deletes on disk.
func TestFileReadsUnassignClosesTheFile(t *testing.T) {
	f := newConsumerFixture(t)
	const topic = "files-unassign"
	f.createTopic(topic, 1)
	fillForFileReads(f, topic, 0, batchesOf10(60)...)
	segment := fmt.Sprintf("/%s-0/%020d.log", topic, 0)
	brokers, ok := openFiles(segment) // the in-process broker's
	if !ok {
		t.Skip("no /proc/self/fd")
	}
	tp := client.TopicPartition{Topic: topic}
	c := f.consumer(client.ConsumerConfig{
		Config: client.Config{Brokers: []string{f.unix()}}, AutoOffsetReset: client.OffsetResetEarliest,
		MaxPartitionFetchBytes: 16 << 10, MaxPollRecords: 1,
	}, tp)
	checkPartitionRecords(t, f.pollN(c, 1), 0, 0, 1)
	if n, _ := openFiles(segment); n != brokers+1 {
		t.Fatalf("%d descriptors on the segment, the broker's %d and the consumer's span: not read from its file?", n, brokers)
	}
	if err := c.Assign(nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, _ := openFiles(segment)
		if n == brokers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after the partition was unassigned, %d descriptors on its segment, want the broker's %d", n, brokers)
		}
	}
}

// A span that names another file than its path leads to, or that has no bytes, is not opened;
// nor is one whose path is relative or leads to no regular file (a directory, a FIFO, a device),
// and the open never waits.
func TestOpenSpanChecksTheFile(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/seg.log"
	if err := os.WriteFile(path, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	good := wire.FileSpan{Path: path, Dev: uint64(st.Dev), Ino: uint64(st.Ino), Pos: 0, Len: 100} //nolint:unconvert // Dev is int32 on darwin
	fifo := dir + "/fifo.log"
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*wire.FileSpan)
		ok   bool
	}{
		{"same file", func(*wire.FileSpan) {}, true},
		{"other inode", func(s *wire.FileSpan) { s.Ino++ }, false},
		{"other device", func(s *wire.FileSpan) { s.Dev++ }, false},
		{"no bytes", func(s *wire.FileSpan) { s.Len = 0 }, false},
		{"negative length", func(s *wire.FileSpan) { s.Len = -5 }, false},
		{"negative position", func(s *wire.FileSpan) { s.Pos = -1 }, false},
		{"end past 2^63", func(s *wire.FileSpan) { s.Pos = math.MaxInt64 - 50 }, false},
		{"missing", func(s *wire.FileSpan) { s.Path = dir + "/gone.log" }, false},
		{"empty path", func(s *wire.FileSpan) { s.Path = "" }, false},
		{"relative path", func(s *wire.FileSpan) { s.Path = relTo(t, path) }, false},
		{"directory", func(s *wire.FileSpan) { s.Path, s.Dev, s.Ino = dir, statDev(t, dir), statIno(t, dir) }, false},
		// A FIFO's open waits for a writer: the fetcher would hang in it, and Close with it.
		{"fifo", func(s *wire.FileSpan) { s.Path, s.Dev, s.Ino = fifo, statDev(t, fifo), statIno(t, fifo) }, false},
		{"device", func(s *wire.FileSpan) {
			s.Path, s.Dev, s.Ino = "/dev/null", statDev(t, "/dev/null"), statIno(t, "/dev/null")
		}, false},
	} {
		sp := good
		tc.edit(&sp)
		done := make(chan error, 1)
		go func() {
			f, err := client.OpenSpanForTest(&sp)
			if f != nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if (err == nil) != tc.ok {
				t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: openSpan still waiting after 10 s", tc.name)
		}
	}
}

func relTo(t *testing.T, path string) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func statDev(t *testing.T, path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Dev) //nolint:unconvert // Dev is int32 on darwin
}

func statIno(t *testing.T, path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// A damaged batch in a piece read from a file is reported as for a fetched one: Poll returns
// the records before it, then the CRC error naming the partition, on every Poll.
func TestFileReadsReportACorruptBatch(t *testing.T) {
	f := newConsumerFixture(t)
	const topic = "files-corrupt"
	f.createTopic(topic, 1)
	fillForFileReads(f, topic, 0, batchesOf10(30)...)
	// Flip a byte in the middle of the 21st batch's records, in the broker's file: its
	// batches are all the same size here except for compression, so find it by walking.
	dataDir := filepath.Dir(f.b.UnixAddr().String()) // brokertest puts the socket there
	path := fmt.Sprintf("%s/%s-0/%020d.log", dataDir, topic, 0)
	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var pos int64
	hdr := make([]byte, batch.LengthFieldEnd)
	for range 20 {
		if _, err := file.ReadAt(hdr, pos); err != nil {
			t.Fatal(err)
		}
		size, err := batch.SizeOf(hdr)
		if err != nil {
			t.Fatal(err)
		}
		pos += int64(size)
	}
	if _, err := file.ReadAt(hdr, pos); err != nil {
		t.Fatal(err)
	}
	size, _ := batch.SizeOf(hdr)
	one := []byte{0}
	if _, err := file.ReadAt(one, pos+int64(size)/2); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0xff
	if _, err := file.WriteAt(one, pos+int64(size)/2); err != nil {
		t.Fatal(err)
	}

	for _, reuse := range []bool{false, true} {
		c := f.consumer(client.ConsumerConfig{
			Config: client.Config{Brokers: []string{f.unix()}}, AutoOffsetReset: client.OffsetResetEarliest,
			MaxPartitionFetchBytes: 256 << 10, ReuseRecordBuffers: reuse,
		}, client.TopicPartition{Topic: topic})
		var got []client.Record
		var perr error
		for perr == nil {
			var recs []client.Record
			recs, perr = c.Poll(f.ctx)
			for _, r := range recs {
				got = append(got, cloneRecord(r))
			}
		}
		if !errors.Is(perr, batch.ErrCRC) || !strings.Contains(perr.Error(), topic) {
			t.Fatalf("reuse %v: Poll error %v, want the CRC mismatch naming the partition", reuse, perr)
		}
		checkPartitionRecords(t, got, 0, 0, 200)
		if _, again := c.Poll(f.ctx); !errors.Is(again, batch.ErrCRC) {
			t.Errorf("reuse %v: the next Poll: %v, want the same error", reuse, again)
		}
		if c.Stats().FileReads == 0 {
			t.Errorf("reuse %v: nothing read from the file", reuse)
		}
		_ = c.Close(context.Background())
	}
}
