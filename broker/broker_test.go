package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/index"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

func testConfig(t testing.TB, dir string) Config {
	t.Helper()
	return Config{
		DataDir:                dir,
		Listen:                 "127.0.0.1:0",
		UnixPath:               filepath.Join(dir, "s.sock"),
		OffsetsTopicPartitions: 2,
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func startBroker(t testing.TB, cfg Config) *Broker {
	t.Helper()
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	<-b.PartitionsOpen()
	return b
}

// transports yields a connection to b over TCP and over the unix socket.
func transports(t *testing.T, b *Broker, fn func(t *testing.T, c *client.Conn)) {
	for _, tr := range []struct{ name, addr string }{
		{"tcp", b.Addr().String()},
		{"unix", "unix://" + b.UnixAddr().String()},
	} {
		t.Run(tr.name, func(t *testing.T) { fn(t, dial(t, tr.addr)) })
	}
}

func dial(t testing.TB, addr string) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func call(t testing.TB, c *client.Conn, req wire.Request, resp wire.Response) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Call(ctx, req, resp); err != nil {
		t.Fatalf("%s: %v", req.Key(), err)
	}
}

func createTopic(t testing.TB, c *client.Conn, name string, partitions int32, configs ...wire.ConfigEntry) {
	t.Helper()
	var resp wire.CreateTopicsResponse
	call(t, c, &wire.CreateTopicsRequest{TimeoutMs: 10000, Topics: []wire.CreateTopicsRequestTopic{
		{Topic: name, NumPartitions: partitions, ReplicationFactor: -1, Configs: configs},
	}}, &resp)
	if code := resp.Topics[0].ErrorCode; code != wire.NoError {
		msg := ""
		if m := resp.Topics[0].ErrorMessage; m != nil {
			msg = *m
		}
		t.Fatalf("create %s: %v: %s", name, code, msg)
	}
}

// alterTopic replaces topic's config overrides with configs and returns the result.
func alterTopic(t testing.TB, c *client.Conn, topic string, configs ...wire.ConfigEntry) wire.AlterConfigsResult {
	t.Helper()
	var ac wire.AlterConfigsResponse
	call(t, c, &wire.AlterConfigsRequest{Resources: []wire.AlterConfigsResource{{ResourceType: wire.ResourceTopic, ResourceName: topic, Configs: configs}}}, &ac)
	return ac.Resources[0]
}

func records(t testing.TB, values ...string) []byte {
	t.Helper()
	bl := batch.NewBuilder(batch.DefaultBuilderOptions())
	for _, v := range values {
		bl.Append(&batch.Record{Timestamp: time.Now().UnixMilli(), Key: []byte("k"), Value: []byte(v)})
	}
	out, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

// produce sends recs and, for a successful acks=1 produce, waits until they are committed
// (awaitCommitted), so that a test reads them right after as before replication: use it on
// partitions whose replicas all fetch (a single node's).
func produce(t testing.TB, c *client.Conn, topic string, partition int32, acks int16, recs []byte) wire.ProduceResponsePartition {
	t.Helper()
	res := produceRaw(t, c, topic, partition, acks, recs)
	if acks == wire.AcksLeader && res.ErrorCode == wire.NoError {
		awaitCommitted(t, c, topic, partition, res.BaseOffset+int64(recordCount(recs))-1)
	}
	return res
}

// produceRaw sends recs and returns the answer, waiting for nothing more.
func produceRaw(t testing.TB, c *client.Conn, topic string, partition int32, acks int16, recs []byte) wire.ProduceResponsePartition {
	t.Helper()
	var resp wire.ProduceResponse
	call(t, c, &wire.ProduceRequest{Acks: acks, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
		{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: partition, Records: recs}}},
	}}, &resp)
	return resp.Topics[0].Partitions[0]
}

// awaitCommitted waits until the high watermark of topic-partition passes last: an acks=1
// write is answered after the leader's append, and consumers see it once it is committed (on
// a single node, once fsynced), which the tests that read right after it wait for. A consumer
// long poll from last returns as the high watermark passes it.
func awaitCommitted(t testing.TB, c *client.Conn, topic string, partition int32, last int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p := fetchP(t, c, topic, partition, last, 5000, 1)
		if p.ErrorCode != wire.NoError || p.HighWatermark > last {
			return // an error is the test's to see in what it does next
		}
	}
	t.Fatalf("%s-%d: high watermark not past %d after 10 s", topic, partition, last)
}

// recordCount is the number of records in the batches of recs.
func recordCount(recs []byte) int {
	n := 0
	for rest := recs; len(rest) > 0; {
		bt, r, err := batch.Next(rest)
		if err != nil {
			break
		}
		n += int(bt.LastOffsetDelta()) + 1
		rest = r
	}
	return n
}

func fetchP(t testing.TB, c *client.Conn, topic string, partition int32, offset int64, maxWaitMs, minBytes int32) wire.FetchResponsePartition {
	t.Helper()
	var resp wire.FetchResponse
	call(t, c, &wire.FetchRequest{ReplicaID: -1, MaxWaitMs: maxWaitMs, MinBytes: minBytes, MaxBytes: 1 << 20, Topics: []wire.FetchRequestTopic{
		{Topic: topic, Partitions: []wire.FetchRequestPartition{{Partition: partition, FetchOffset: offset, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}},
	}}, &resp)
	p := resp.Topics[0].Partitions[0]
	p.Records = append([]byte(nil), p.Records...)
	return p
}

// fetchedValues decodes the record values of a fetch's records: every whole batch, stopping
// at a partial one at the end (a fetch may end in part of a batch); a first batch that does
// not decode, or a corrupt record, fails the test.
func fetchedValues(t testing.TB, records []byte) []string {
	t.Helper()
	var got []string
	for rest := records; len(rest) > 0; {
		bt, r, err := batch.Next(rest)
		if err != nil && len(rest) < len(records) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		it := bt.Iter(batch.IterOptions{})
		var rec batch.Record
		for it.Next(&rec) {
			got = append(got, string(rec.Value))
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		rest = r
	}
	return got
}

func TestProduceFetchIdenticalBytes(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	transports(t, b, func(t *testing.T, c *client.Conn) {
		topic := "bytes-" + t.Name()[len("TestProduceFetchIdenticalBytes/"):]
		createTopic(t, c, topic, 1)
		var sent []byte
		for i := range 20 {
			recs := records(t, fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i))
			res := produce(t, c, topic, 0, wire.AcksLeader, recs)
			if res.ErrorCode != wire.NoError || res.BaseOffset != int64(2*i) {
				t.Fatalf("produce %d: %+v", i, res)
			}
			batch.Batch(recs).SetBaseOffset(batch.Offset(2 * i)) // what the broker stamps
			sent = append(sent, recs...)
		}
		got := fetchP(t, c, topic, 0, 0, 0, 1)
		if got.ErrorCode != wire.NoError || got.HighWatermark != 40 || got.LogStartOffset != 0 {
			t.Fatalf("fetch: %+v", got)
		}
		// The broker stamps the partition leader epoch (0) too; the producer sent -1.
		for rest := sent; len(rest) > 0; {
			bt, r, _ := batch.Next(rest)
			bt.SetPartitionLeaderEpoch(0)
			rest = r
		}
		if !bytes.Equal(got.Records, sent) {
			t.Fatalf("fetched bytes differ from produced bytes (%d vs %d)", len(got.Records), len(sent))
		}
	})
	// Both fetches were served from the segment file: small ones are read into the response
	// (net/server's inlineFileMax), larger ones go out with sendfile; none took the copying
	// fallback. The counters are bumped after each write returns, so poll briefly. Elsewhere
	// than on Linux net/server has no sendfile and copies large file parts (sendfile_other.go).
	if runtime.GOOS != "linux" {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.srv.Stats().SendfileBytes+b.srv.Stats().InlinedFileBytes == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if st := b.srv.Stats(); st.SendfileBytes+st.InlinedFileBytes == 0 || st.CopiedFileBytes != 0 {
		t.Fatalf("fetch was not served from the segment file: %+v", st)
	}
}

func TestPipelinedProduce(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "pipe", 1)
	var wg sync.WaitGroup
	offsets := make(chan int64, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := produce(t, c, "pipe", 0, wire.AcksAll, records(t, fmt.Sprint(i)))
			if res.ErrorCode != wire.NoError {
				t.Errorf("produce: %v", res.ErrorCode)
			}
			offsets <- res.BaseOffset
		}()
	}
	wg.Wait()
	close(offsets)
	seen := map[int64]bool{}
	for o := range offsets {
		if seen[o] {
			t.Fatalf("offset %d assigned twice", o)
		}
		seen[o] = true
	}
	if len(seen) != 100 {
		t.Fatalf("%d distinct offsets, want 100", len(seen))
	}
}

func TestLongPollWakesOnAppend(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "poll", 1)
	got := make(chan wire.FetchResponsePartition, 1)
	start := time.Now()
	go func() { got <- fetchP(t, c, "poll", 0, 0, 20000, 1) }()
	// The fetch parks; produce on another connection wakes it.
	p := dial(t, b.Addr().String())
	// Give the fetch a moment to park; the assertion below does not depend on it.
	for b.partition("poll", 0).parkedCount() == 0 && time.Since(start) < 5*time.Second {
		time.Sleep(time.Millisecond)
	}
	appended := time.Now()
	produce(t, p, "poll", 0, wire.AcksLeader, records(t, "wake"))
	select {
	case r := <-got:
		if len(r.Records) == 0 {
			t.Fatalf("woken fetch returned no records: %+v", r)
		}
		t.Logf("long poll answered %v after the append", time.Since(appended))
	case <-time.After(15 * time.Second):
		t.Fatal("long poll not woken by the append")
	}
}

func TestAcksSemantics(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "acks", 1)
	// acks=0: no response; the next request's response still matches its own correlation id.
	if err := c.Send(&wire.ProduceRequest{Acks: 0, TimeoutMs: 1000, Topics: []wire.ProduceRequestTopic{
		{Topic: "acks", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, "zero")}}},
	}}); err != nil {
		t.Fatal(err)
	}
	res := produce(t, c, "acks", 0, wire.AcksLeader, records(t, "one"))
	if res.ErrorCode != wire.NoError || res.BaseOffset != 1 {
		t.Fatalf("acks=1 after acks=0: %+v (the acks=0 record should hold offset 0)", res)
	}
	// acks=all on write.caching=false: answered only once fsynced.
	res = produce(t, c, "acks", 0, wire.AcksAll, records(t, "all"))
	if res.ErrorCode != wire.NoError {
		t.Fatal(res.ErrorCode)
	}
	if synced := b.partition("acks", 0).log().SyncedOffset(); synced <= 2 {
		t.Fatalf("acks=all answered before its record was fsynced (synced offset %d)", synced)
	}
	// Invalid acks.
	if res := produce(t, c, "acks", 0, 7, records(t, "x")); res.ErrorCode != wire.ErrInvalidRequiredAcks {
		t.Fatalf("acks=7: %v", res.ErrorCode)
	}
}

// Bad input gets a clear error code and changes nothing.
func TestBadInput(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	transports(t, b, func(t *testing.T, c *client.Conn) {
		topic := "bad-" + filepath.Base(t.Name())
		createTopic(t, c, topic, 1, wire.ConfigEntry{Name: "max.message.bytes", Value: strPtr("2000")})
		produce(t, c, topic, 0, wire.AcksLeader, records(t, "good"))

		corrupt := records(t, "corrupt")
		corrupt[len(corrupt)-1] ^= 0xff
		if res := produce(t, c, topic, 0, wire.AcksAll, corrupt); res.ErrorCode != wire.ErrCorruptMessage {
			t.Errorf("corrupt batch: %v", res.ErrorCode)
		}
		big := records(t, string(bytes.Repeat([]byte("x"), 3000)))
		if res := produce(t, c, topic, 0, wire.AcksLeader, big); res.ErrorCode != wire.ErrMessageTooLarge {
			t.Errorf("oversized batch: %v", res.ErrorCode)
		}
		if got := fetchP(t, c, topic, 0, 0, 0, 1); got.HighWatermark != 1 {
			t.Errorf("rejected batches moved the high watermark to %d", got.HighWatermark)
		}
		if res := produce(t, c, "no-such-topic", 0, wire.AcksLeader, records(t, "x")); res.ErrorCode != wire.ErrUnknownTopicOrPartition {
			t.Errorf("unknown topic: %v", res.ErrorCode)
		}
		if res := produce(t, c, topic, 9, wire.AcksLeader, records(t, "x")); res.ErrorCode != wire.ErrUnknownTopicOrPartition {
			t.Errorf("unknown partition: %v", res.ErrorCode)
		}
		if got := fetchP(t, c, topic, 0, 5, 0, 1); got.ErrorCode != wire.ErrOffsetOutOfRange || got.HighWatermark != 1 || got.LogStartOffset != 0 {
			t.Errorf("offset out of range: %+v", got)
		}
		var cr wire.CreateTopicsResponse
		call(t, c, &wire.CreateTopicsRequest{TimeoutMs: 5000, Topics: []wire.CreateTopicsRequestTopic{{Topic: "bad/name", NumPartitions: 1, ReplicationFactor: -1}}}, &cr)
		if cr.Topics[0].ErrorCode != wire.ErrInvalidTopicException {
			t.Errorf("invalid topic name: %v", cr.Topics[0].ErrorCode)
		}
		call(t, c, &wire.CreateTopicsRequest{TimeoutMs: 5000, Topics: []wire.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: 1, ReplicationFactor: -1}}}, &cr)
		if cr.Topics[0].ErrorCode != wire.ErrTopicAlreadyExists {
			t.Errorf("duplicate topic: %v", cr.Topics[0].ErrorCode)
		}
	})
}

func strPtr(s string) *string { return &s }

// A malformed frame closes that connection only.
func TestMalformedFrameClosesOnlyThatConnection(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	good := dial(t, b.Addr().String())
	createTopic(t, good, "m", 1)
	for _, garbage := range [][]byte{
		{0x7f, 0xff, 0xff, 0xff},                                              // a 2 GiB frame
		{0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 1, 0, 9, 'x', 'y'},                 // header with a client id longer than the frame
		append([]byte{0, 0, 0, 14, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}, 1, 2, 3, 4), // produce with a truncated body
	} {
		nc, err := net.Dial("tcp", b.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = nc.Write(garbage)
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := nc.Read(make([]byte, 64)); err == nil {
			t.Errorf("garbage %x: got %d bytes back instead of a closed connection", garbage, n)
		}
		nc.Close()
	}
	if res := produce(t, good, "m", 0, wire.AcksLeader, records(t, "still fine")); res.ErrorCode != wire.NoError {
		t.Fatalf("other connection affected: %v", res.ErrorCode)
	}
}

func TestTopicAdminAndRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, testConfig(t, dir))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "keep", 3, wire.ConfigEntry{Name: "retention.ms", Value: strPtr("3600000")})
	createTopic(t, c, "drop", 1)
	for p := range int32(3) {
		produce(t, c, "keep", p, wire.AcksAll, records(t, fmt.Sprint(p)))
	}
	// Metadata lists both, with partitions and a leader.
	var md wire.MetadataResponse
	call(t, c, &wire.MetadataRequest{}, &md)
	names := map[string]int{}
	for _, tp := range md.Topics {
		names[tp.Topic] = len(tp.Partitions)
		for _, p := range tp.Partitions {
			if p.Leader != 0 || p.ErrorCode != wire.NoError { // node.id unset: 0, Kafka's first id

				t.Fatalf("%s/%d: leader %d, error %v", tp.Topic, p.Partition, p.Leader, p.ErrorCode)
			}
		}
	}
	if names["keep"] != 3 || names["drop"] != 1 || len(md.Brokers) != 1 || md.Brokers[0].UnixPath == "" {
		t.Fatalf("metadata: %v brokers %+v", names, md.Brokers)
	}
	// Describe shows the override; alter replaces the overrides.
	var dc wire.DescribeConfigsResponse
	call(t, c, &wire.DescribeConfigsRequest{Resources: []wire.DescribeConfigsResource{{ResourceType: wire.ResourceTopic, ResourceName: "keep", ConfigNames: []string{"retention.ms"}}}}, &dc)
	if e := dc.Resources[0].Configs; len(e) != 1 || *e[0].Value != "3600000" || e[0].Source != wire.ConfigSourceDynamicTopic {
		t.Fatalf("describe: %+v", dc.Resources[0])
	}
	if code := alterTopic(t, c, "keep", wire.ConfigEntry{Name: "write.caching", Value: strPtr("true")}).ErrorCode; code != wire.NoError {
		t.Fatalf("alter: %v", code)
	}
	if !b.partition("keep", 0).cfg.Load().WriteCaching {
		t.Fatal("altered config not applied to the partition")
	}
	if code := alterTopic(t, c, "keep", wire.ConfigEntry{Name: "retention.ms", Value: strPtr("soon")}).ErrorCode; code != wire.ErrInvalidConfig {
		t.Fatalf("invalid config value: %v", code)
	}
	// Delete removes the data.
	var dr wire.DeleteTopicsResponse
	call(t, c, &wire.DeleteTopicsRequest{Topics: []string{"drop"}, TimeoutMs: 5000}, &dr)
	if dr.Topics[0].ErrorCode != wire.NoError {
		t.Fatalf("delete: %v", dr.Topics[0].ErrorCode)
	}
	if _, err := os.Stat(filepath.Join(dir, "drop-0")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("deleted topic's data still there: %v", err)
	}
	if res := produce(t, c, "drop", 0, wire.AcksLeader, records(t, "x")); res.ErrorCode != wire.ErrUnknownTopicOrPartition {
		t.Fatalf("produce to deleted topic: %v", res.ErrorCode)
	}

	// Restart: topics, configs and data survive; the shutdown was clean.
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker: %v", err)
	}
	b2 := startBroker(t, testConfig(t, dir))
	c2 := dial(t, b2.Addr().String())
	for p := range int32(3) {
		got := fetchP(t, c2, "keep", p, 0, 0, 1)
		if got.HighWatermark != 1 || len(got.Records) == 0 {
			t.Fatalf("keep/%d after restart: %+v", p, got)
		}
	}
	if !b2.partition("keep", 1).cfg.Load().WriteCaching {
		t.Fatal("altered config lost across restart")
	}
	if b2.partition("drop", 0) != nil {
		t.Fatal("deleted topic back after restart")
	}
}

func TestListOffsets(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "lo", 1)
	bl := batch.NewBuilder(batch.DefaultBuilderOptions())
	for i := range 10 {
		bl.Append(&batch.Record{Timestamp: int64(1000 + i*100), Value: []byte("v")})
	}
	recs, _ := bl.Build()
	produce(t, c, "lo", 0, wire.AcksLeader, append([]byte(nil), recs...))
	for _, tc := range []struct {
		ts         int64
		off, recTs int64
	}{
		{wire.EarliestTimestamp, 0, -1},
		{wire.LatestTimestamp, 10, -1},
		{1250, 3, 1300},
		{1000, 0, 1000},
		{99999, -1, -1},
	} {
		var resp wire.ListOffsetsResponse
		call(t, c, &wire.ListOffsetsRequest{ReplicaID: -1, Topics: []wire.ListOffsetsRequestTopic{{Topic: "lo", Partitions: []wire.ListOffsetsRequestPartition{{Partition: 0, CurrentLeaderEpoch: -1, Timestamp: tc.ts}}}}}, &resp)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != wire.NoError || p.Offset != tc.off || p.Timestamp != tc.recTs {
			t.Errorf("ListOffsets(%d) = offset %d ts %d (%v), want %d, %d", tc.ts, p.Offset, p.Timestamp, p.ErrorCode, tc.off, tc.recTs)
		}
	}
}

func TestOffsetCommitSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, testConfig(t, dir))
	awaitGroups(t, b)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "oc", 2)
	md := "cursor"
	var cr wire.OffsetCommitResponse
	call(t, c, &wire.OffsetCommitRequest{GroupID: "g1", GenerationID: -1, Topics: []wire.OffsetCommitRequestTopic{
		{Topic: "oc", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: 42, LeaderEpoch: 0, Metadata: &md}, {Partition: 1, Offset: 7, LeaderEpoch: -1}}},
	}}, &cr)
	for _, p := range cr.Topics[0].Partitions {
		if p.ErrorCode != wire.NoError {
			t.Fatalf("commit: %v", p.ErrorCode)
		}
	}
	call(t, c, &wire.OffsetCommitRequest{GroupID: "g1", GenerationID: -1, Topics: []wire.OffsetCommitRequestTopic{
		{Topic: "oc", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: 43, LeaderEpoch: 0, Metadata: &md}}},
	}}, &cr)
	check := func(c *client.Conn) {
		var fr wire.OffsetFetchResponse
		call(t, c, &wire.OffsetFetchRequest{GroupID: "g1", Topics: []wire.OffsetFetchRequestTopic{{Topic: "oc", Partitions: []int32{0, 1, 5}}}}, &fr)
		ps := fr.Topics[0].Partitions
		if ps[0].Offset != 43 || ps[0].Metadata == nil || *ps[0].Metadata != "cursor" || ps[1].Offset != 7 || ps[2].Offset != -1 {
			t.Fatalf("offset fetch: %+v", ps)
		}
		call(t, c, &wire.OffsetFetchRequest{GroupID: "other", Topics: []wire.OffsetFetchRequestTopic{{Topic: "oc", Partitions: []int32{0}}}}, &fr)
		if fr.Topics[0].Partitions[0].Offset != -1 {
			t.Fatal("another group sees g1's offsets")
		}
	}
	check(c)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, testConfig(t, dir))
	awaitGroups(t, b2)
	check(dial(t, b2.Addr().String()))
}

// A consumer that stops reading its fetch responses never blocks producers of the same
// partition: no handler holds a partition lock across socket I/O.
func TestSlowFetchDoesNotBlockProduce(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "slow", 1)
	big := records(t, string(bytes.Repeat([]byte("x"), 512<<10)))
	for range 8 {
		produce(t, c, "slow", 0, wire.AcksLeader, append([]byte(nil), big...))
	}
	// A raw connection that asks for everything, many times, and reads nothing back: its
	// responses fill the socket buffers and its writer blocks in sendfile.
	nc, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := wire.FetchRequest{ReplicaID: -1, MaxBytes: 8 << 20, Topics: []wire.FetchRequestTopic{
		{Topic: "slow", Partitions: []wire.FetchRequestPartition{{Partition: 0, PartitionMaxBytes: 8 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}},
	}}
	var frame []byte
	for i := range 10 {
		frame = wire.AppendRequestFrame(frame, &wire.RequestHeader{APIKey: wire.Fetch, CorrelationID: int32(i)}, &req)
	}
	go func() { _, _ = nc.Write(frame) }()
	for i := range 50 {
		if res := produce(t, c, "slow", 0, wire.AcksAll, records(t, fmt.Sprint(i))); res.ErrorCode != wire.NoError {
			t.Fatalf("produce %d while a fetch is stuck: %v", i, res.ErrorCode)
		}
	}
}

// A topic deleted and created again under the same name starts empty: no byte of the old
// topic is served.
func TestRecreatedTopicStartsEmpty(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "again", 1)
	for range 3 {
		produce(t, c, "again", 0, wire.AcksAll, records(t, "old"))
	}
	var dr wire.DeleteTopicsResponse
	call(t, c, &wire.DeleteTopicsRequest{Topics: []string{"again"}, TimeoutMs: 5000}, &dr)
	if dr.Topics[0].ErrorCode != wire.NoError {
		t.Fatal(dr.Topics[0].ErrorCode)
	}
	createTopic(t, c, "again", 1)
	if got := fetchP(t, c, "again", 0, 0, 0, 1); got.ErrorCode != wire.NoError || got.HighWatermark != 0 || len(got.Records) != 0 {
		t.Fatalf("re-created topic: %+v", got)
	}
	if res := produce(t, c, "again", 0, wire.AcksLeader, records(t, "new")); res.BaseOffset != 0 {
		t.Fatalf("first record of the re-created topic at offset %d", res.BaseOffset)
	}
}

func TestAutoCreateTopics(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.AutoCreateTopics, cfg.NumPartitions = true, 3
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	var md wire.MetadataResponse
	call(t, c, &wire.MetadataRequest{Topics: []string{"auto"}, AllowAutoTopicCreation: true}, &md)
	if md.Topics[0].ErrorCode != wire.NoError || len(md.Topics[0].Partitions) != 3 {
		t.Fatalf("auto-created topic: %+v", md.Topics[0])
	}
	call(t, c, &wire.MetadataRequest{Topics: []string{"not-allowed"}, AllowAutoTopicCreation: false}, &md)
	if md.Topics[0].ErrorCode != wire.ErrUnknownTopicOrPartition {
		t.Fatalf("client did not allow creation: %v", md.Topics[0].ErrorCode)
	}
	// Off by default.
	b2 := startBroker(t, testConfig(t, t.TempDir()))
	call(t, dial(t, b2.Addr().String()), &wire.MetadataRequest{Topics: []string{"auto"}, AllowAutoTopicCreation: true}, &md)
	if md.Topics[0].ErrorCode != wire.ErrUnknownTopicOrPartition {
		t.Fatalf("auto.create.topics.enable is off by default: %v", md.Topics[0].ErrorCode)
	}
}

func TestOffsetCommitErrors(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	awaitGroups(t, b)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "oe", 1)
	long := string(bytes.Repeat([]byte("m"), 5000))
	var cr wire.OffsetCommitResponse
	call(t, c, &wire.OffsetCommitRequest{GroupID: "g", GenerationID: -1, Topics: []wire.OffsetCommitRequestTopic{
		{Topic: "oe", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1, Metadata: &long}, {Partition: 7, Offset: 1, LeaderEpoch: -1}}},
		{Topic: "missing", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}},
	}}, &cr)
	want := []wire.ErrorCode{wire.ErrOffsetMetadataTooLarge, wire.ErrUnknownTopicOrPartition, wire.ErrUnknownTopicOrPartition}
	got := []wire.ErrorCode{cr.Topics[0].Partitions[0].ErrorCode, cr.Topics[0].Partitions[1].ErrorCode, cr.Topics[1].Partitions[0].ErrorCode}
	if !slices.Equal(got, want) {
		t.Fatalf("commit errors %v, want %v", got, want)
	}
	call(t, c, &wire.OffsetCommitRequest{GroupID: "", GenerationID: -1, Topics: []wire.OffsetCommitRequestTopic{
		{Topic: "oe", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}},
	}}, &cr)
	if code := cr.Topics[0].Partitions[0].ErrorCode; code != wire.ErrInvalidGroupID {
		t.Fatalf("empty group id: %v", code)
	}
}

// TestRelativeUnixSocketIsAdvertisedAbsolute: with the default socket in a relative data
// directory (`sluice serve` run with defaults), metadata must name the socket by an absolute
// path, or a client started from another directory cannot reach it.
func TestRelativeUnixSocketIsAdvertisedAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cfg := testConfig(t, "data")
	cfg.UnixPath = "" // the default: <data-dir>/sluice.sock
	b := startBroker(t, cfg)
	var md wire.MetadataResponse
	call(t, dial(t, b.Addr().String()), &wire.MetadataRequest{}, &md)
	if len(md.Brokers) != 1 {
		t.Fatalf("brokers %+v", md.Brokers)
	}
	got := md.Brokers[0].UnixPath
	if !filepath.IsAbs(got) {
		t.Fatalf("advertised unix socket %q is relative", got)
	}
	want, err := os.Stat(filepath.Join(dir, "data", "sluice.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(got); err != nil || !os.SameFile(fi, want) {
		t.Fatalf("advertised %q is not the socket in %s (%v)", got, dir, err)
	}
	// The advertised path works from anywhere.
	t.Chdir(t.TempDir())
	var md2 wire.MetadataResponse
	call(t, dial(t, "unix://"+got), &wire.MetadataRequest{}, &md2)
	if len(md2.Brokers) != 1 || md2.Brokers[0].UnixPath != got {
		t.Fatalf("through the socket: brokers %+v", md2.Brokers)
	}
}

// TestLongInvalidValueDoesNotCrash: an error message that quotes what a client sent can be
// longer than a string's int16 length prefix (a 32,700-byte config value, quoted with its
// key). The broker answers with the message cut, and goes on serving; it used to panic in the
// encoder and die.
func TestLongInvalidValueDoesNotCrash(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	long := strings.Repeat("x", 32700)
	var cr wire.CreateTopicsResponse
	call(t, c, &wire.CreateTopicsRequest{TimeoutMs: 5000, Topics: []wire.CreateTopicsRequestTopic{
		{Topic: "big", NumPartitions: 1, ReplicationFactor: -1, Configs: []wire.ConfigEntry{{Name: "retention.ms", Value: &long}}},
	}}, &cr)
	if got := cr.Topics[0]; got.ErrorCode != wire.ErrInvalidConfig || got.ErrorMessage == nil ||
		len(*got.ErrorMessage) > wire.MaxErrorMessageBytes || !strings.Contains(*got.ErrorMessage, "retention.ms") {
		t.Fatalf("create with a long invalid value: %v %v", got.ErrorCode, got.ErrorMessage != nil)
	}
	createTopic(t, c, "a1", 1)
	if got := alterTopic(t, c, "a1", wire.ConfigEntry{Name: "retention.ms", Value: &long}); got.ErrorCode != wire.ErrInvalidConfig || got.ErrorMessage == nil || len(*got.ErrorMessage) > wire.MaxErrorMessageBytes {
		t.Fatalf("alter with a long invalid value: %v", got.ErrorCode)
	}
	// Still serving, on the same connection and on a new one.
	var md wire.MetadataResponse
	call(t, c, &wire.MetadataRequest{}, &md)
	call(t, dial(t, b.Addr().String()), &wire.MetadataRequest{}, &md)
	if len(md.Brokers) != 1 {
		t.Fatalf("metadata after: %+v", md.Brokers)
	}
}

// TestAcksAllNeedsMinInsyncReplicas: with min.insync.replicas above the ISR's size (3, on a
// topic of three replicas one of which has died), acks=all is refused with NOT_ENOUGH_REPLICAS
// and nothing is appended, as in Kafka; acks=1 still appends. Lowering the setting lets acks=all
// through again. (A single node cannot show it: min.insync.replicas above the replication
// factor is refused at create, TestMinInsyncReplicasAboveReplicationFactor.)
func TestAcksAllNeedsMinInsyncReplicas(t *testing.T) {
	brokers, _ := threeBrokers(t, func(c *Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.SessionTimeout = time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tm, err := brokers[0].Controller().CreateTopic(ctx, cluster.TopicSpec{Name: "mir", NumPartitions: 1, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	leader := tm.Partitions[0].Leader
	victim := brokers[(leader+1)%3]
	victim.cfg.DisableControlledShutdown = true // a crash: its session times out, the ISR shrinks
	if err := victim.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	lb := brokers[leader]
	waitFor(t, 20*time.Second, "the ISR to shrink to two", func() bool {
		p := lb.partition("mir", 0)
		tm, _ := lb.Controller().Metadata().Topic("mir")
		return p != nil && len(tm.Partitions[0].ISR) == 2 && !p.acksAll.Load()
	})
	c := dial(t, lb.Addr().String())
	if res := produce(t, c, "mir", 0, wire.AcksAll, records(t, "all")); res.ErrorCode != wire.ErrNotEnoughReplicas {
		t.Fatalf("acks=all with min.insync.replicas=3 and two in sync: %v, want NOT_ENOUGH_REPLICAS", res.ErrorCode)
	}
	if end := lb.partition("mir", 0).log().EndOffset(); end != 0 {
		t.Fatalf("the refused acks=all batch was appended: log end %d", end)
	}
	if res := produceRaw(t, c, "mir", 0, wire.AcksLeader, records(t, "one")); res.ErrorCode != wire.NoError || res.BaseOffset != 0 {
		t.Fatalf("acks=1: %+v", res)
	}
	if code := alterTopic(t, c, "mir", wire.ConfigEntry{Name: "min.insync.replicas", Value: strPtr("2")}).ErrorCode; code != wire.NoError {
		t.Fatal(code)
	}
	if res := produce(t, c, "mir", 0, wire.AcksAll, records(t, "all")); res.ErrorCode != wire.NoError || res.BaseOffset != 1 {
		t.Fatalf("acks=all after lowering min.insync.replicas to 2: %+v", res)
	}
}

// TestSegmentIndexBytesHoldsAnEntry: a topic whose segment.index.bytes cannot hold one index
// entry is refused at creation; it used to commit, and then no broker could open its
// partitions. The smallest accepted value serves.
func TestSegmentIndexBytesHoldsAnEntry(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	var cr wire.CreateTopicsResponse
	call(t, c, &wire.CreateTopicsRequest{TimeoutMs: 5000, Topics: []wire.CreateTopicsRequestTopic{{Topic: "tiny", NumPartitions: 1, ReplicationFactor: -1,
		Configs: []wire.ConfigEntry{{Name: "segment.index.bytes", Value: strPtr("11")}}}}}, &cr)
	if code := cr.Topics[0].ErrorCode; code != wire.ErrInvalidConfig {
		t.Fatalf("segment.index.bytes=11: %v, want INVALID_CONFIG", code)
	}
	smallest := strconv.Itoa(max(index.OffsetEntrySize, index.TimeEntrySize))
	createTopic(t, c, "small", 1, wire.ConfigEntry{Name: "segment.index.bytes", Value: &smallest})
	for i := range 3 {
		if res := produce(t, c, "small", 0, wire.AcksLeader, records(t, "v")); res.ErrorCode != wire.NoError || res.BaseOffset != int64(i) {
			t.Fatalf("produce %d: %+v", i, res)
		}
	}
	// One index entry per segment: each batch rolls a new segment, and a fetch reads one.
	for off := range int64(3) {
		if got := fetchedValues(t, fetchP(t, c, "small", 0, off, 0, 1).Records); len(got) != 1 || got[0] != "v" {
			t.Fatalf("fetch at %d: %q", off, got)
		}
	}
}

// TestDescribedConfigsCanBeSetAgain: every value DescribeConfigs shows for a topic, defaults
// included, is accepted by AlterConfigs as it is written (flush.ms used to be described as -1,
// which its own rule refuses).
func TestDescribedConfigsCanBeSetAgain(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "described", 1)
	var dc wire.DescribeConfigsResponse
	call(t, c, &wire.DescribeConfigsRequest{Resources: []wire.DescribeConfigsResource{{ResourceType: wire.ResourceTopic, ResourceName: "described"}}}, &dc)
	entries := dc.Resources[0].Configs
	if len(entries) < 10 {
		t.Fatalf("described %d configs", len(entries))
	}
	var set []wire.ConfigEntry
	for _, e := range entries {
		if e.Value == nil {
			continue
		}
		if e.Name == "flush.ms" && *e.Value != "9223372036854775807" {
			t.Errorf("flush.ms described as %q, want Kafka's never, 9223372036854775807", *e.Value)
		}
		set = append(set, wire.ConfigEntry{Name: e.Name, Value: e.Value})
	}
	if r := alterTopic(t, c, "described", set...); r.ErrorCode != wire.NoError {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		t.Fatalf("setting the described values again: %v: %s", r.ErrorCode, msg)
	}
}

// TestTopicNeedingTooManyOpenFilesIsRefused: a topic whose partitions would need more open
// files than the process may have is refused with POLICY_VIOLATION, saying what to raise. It
// used to be created; its logs then failed to open with "too many open files", and the data
// directory could not start again.
func TestTopicNeedingTooManyOpenFilesIsRefused(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.openFileLimit, cfg.MaxOpenFiles = 100, 15 // 25 connections, 15 sealed segments and 6 more spare, 1 per partition: room for 54
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	var cr wire.CreateTopicsResponse
	call(t, c, &wire.CreateTopicsRequest{TimeoutMs: 5000, Topics: []wire.CreateTopicsRequestTopic{{Topic: "many", NumPartitions: 100, ReplicationFactor: -1}}}, &cr)
	if got := cr.Topics[0]; got.ErrorCode != wire.ErrPolicyViolation || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "ulimit") {
		t.Fatalf("100 partitions with room for 54: %v %v", got.ErrorCode, got.ErrorMessage != nil)
	}
	var md wire.MetadataResponse
	call(t, c, &wire.MetadataRequest{Topics: []string{"many"}}, &md)
	if md.Topics[0].ErrorCode != wire.ErrUnknownTopicOrPartition {
		t.Fatalf("the refused topic exists: %+v", md.Topics[0])
	}
	createTopic(t, c, "some", 40) // with the offsets topic's 2: 42 of 54
	call(t, c, &wire.CreateTopicsRequest{TimeoutMs: 5000, Topics: []wire.CreateTopicsRequestTopic{{Topic: "more", NumPartitions: 20, ReplicationFactor: -1}}}, &cr)
	if code := cr.Topics[0].ErrorCode; code != wire.ErrPolicyViolation {
		t.Fatalf("20 more partitions with room for 12: %v", code)
	}
}

// A relative socket path whose absolute form would not fit a socket address is advertised as
// given (reachable from the broker's directory), not as an absolute path nobody can dial.
func TestAdvertisedUnixPathTooLongStaysRelative(t *testing.T) {
	b := &Broker{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t.Chdir(t.TempDir())
	deep := strings.Repeat("d", 100)
	if got := b.advertisedUnixPath(filepath.Join(deep, "s.sock")); got != filepath.Join(deep, "s.sock") {
		t.Fatalf("a path too long made absolute: %q", got)
	}
	if got := b.advertisedUnixPath("s.sock"); !filepath.IsAbs(got) || filepath.Base(got) != "s.sock" {
		t.Fatalf("a short relative path advertised as %q", got)
	}
}

// A deleted topic's committed offsets go with it, as in Kafka: a group must not resume a new
// topic of the same name at the old topic's positions (it would skip the new records), neither
// at once nor after a restart.
func TestDeletedTopicForgetsCommittedOffsets(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, testConfig(t, dir))
	awaitGroups(t, b)
	c := dial(t, b.Addr().String())
	commit := func(c *client.Conn, group, topic string, offset int64) {
		t.Helper()
		var cr wire.OffsetCommitResponse
		call(t, c, &wire.OffsetCommitRequest{GroupID: group, GenerationID: -1, Topics: []wire.OffsetCommitRequestTopic{
			{Topic: topic, Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}},
		}}, &cr)
		if code := cr.Topics[0].Partitions[0].ErrorCode; code != wire.NoError {
			t.Fatalf("commit %s %s: %v", group, topic, code)
		}
	}
	committed := func(c *client.Conn, group, topic string) int64 {
		t.Helper()
		var fr wire.OffsetFetchResponse
		call(t, c, &wire.OffsetFetchRequest{GroupID: group, Topics: []wire.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0}}}}, &fr)
		return fr.Topics[0].Partitions[0].Offset
	}
	deleteTopic := func(c *client.Conn, topic string) {
		t.Helper()
		var dr wire.DeleteTopicsResponse
		call(t, c, &wire.DeleteTopicsRequest{Topics: []string{topic}, TimeoutMs: 5000}, &dr)
		if dr.Topics[0].ErrorCode != wire.NoError {
			t.Fatal(dr.Topics[0].ErrorCode)
		}
	}
	for _, topic := range []string{"recreated", "gone", "kept"} {
		createTopic(t, c, topic, 1)
		for _, g := range []string{"g1", "g2", "g3"} {
			commit(c, g, topic, 30)
		}
	}
	deleteTopic(c, "recreated")
	createTopic(t, c, "recreated", 1)
	deleteTopic(c, "gone")
	for _, g := range []string{"g1", "g2", "g3"} {
		if got := committed(c, g, "recreated"); got != -1 {
			t.Errorf("group %s: re-created topic has the old topic's committed offset %d", g, got)
		}
		if got := committed(c, g, "kept"); got != 30 {
			t.Errorf("group %s: offset of an untouched topic %d, want 30", g, got)
		}
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, testConfig(t, dir))
	awaitGroups(t, b2)
	c2 := dial(t, b2.Addr().String())
	createTopic(t, c2, "gone", 1)
	for _, g := range []string{"g1", "g2", "g3"} {
		for _, topic := range []string{"recreated", "gone"} {
			if got := committed(c2, g, topic); got != -1 {
				t.Errorf("after restart, group %s: %s has the deleted topic's committed offset %d", g, topic, got)
			}
		}
		if got := committed(c2, g, "kept"); got != 30 {
			t.Errorf("after restart, group %s: offset of an untouched topic %d, want 30", g, got)
		}
	}
}

// Retention skips __consumer_offsets even when its configs would delete every segment, the
// active one too: a topic with the same configs, written after the commits, is emptied by the
// retention loop, which so has gone over the offsets partition since, and the commits are
// still there, also after a restart.
func TestRetentionSkipsOffsetsTopicEvenWhenItWouldEmptyIt(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.OffsetsTopicPartitions = 1
	cfg.RetentionCheck = 10 * time.Millisecond
	b := startBroker(t, cfg)
	awaitGroups(t, b)
	c := dial(t, b.Addr().String())
	zero := []wire.ConfigEntry{{Name: "retention.ms", Value: strPtr("0")}, {Name: "retention.bytes", Value: strPtr("0")}}
	if res := alterTopic(t, c, OffsetsTopic, zero...); res.ErrorCode != wire.NoError {
		t.Fatalf("alter %s: %v", OffsetsTopic, res.ErrorCode)
	}
	createTopic(t, c, "t", 1)
	var cr wire.OffsetCommitResponse
	call(t, c, &wire.OffsetCommitRequest{GroupID: "g", GenerationID: -1, Topics: []wire.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: 42, LeaderEpoch: -1}}},
	}}, &cr)
	if code := cr.Topics[0].Partitions[0].ErrorCode; code != wire.NoError {
		t.Fatalf("commit: %v", code)
	}
	offsetsLog := b.partition(OffsetsTopic, 0).log()
	committedEnd := offsetsLog.EndOffset()
	if committedEnd == 0 {
		t.Fatal("the commit appended nothing")
	}

	// Emptied twice: the pass that emptied it the first time, which may have come to the
	// offsets partition after it, has ended before the second one empties it.
	createTopic(t, c, "control", 1, zero...)
	control := b.partition("control", 0).log()
	for i := range 2 {
		if p := produce(t, c, "control", 0, wire.AcksLeader, records(t, "gone")); p.ErrorCode != wire.NoError {
			t.Fatal(p.ErrorCode)
		}
		deadline := time.Now().Add(10 * time.Second)
		for control.StartOffset() != batch.Offset(i+1) && time.Now().Before(deadline) {
			time.Sleep(cfg.RetentionCheck)
		}
		if start := control.StartOffset(); start != batch.Offset(i+1) {
			t.Fatalf("control topic's log start %d after 10 s, want %d: the retention loop did not run", start, i+1)
		}
	}
	if start, end := offsetsLog.StartOffset(), offsetsLog.EndOffset(); start != 0 || end != committedEnd {
		t.Fatalf("retention moved %s-0 to [%d, %d), want [0, %d)", OffsetsTopic, start, end, committedEnd)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, cfg)
	awaitGroups(t, b2)
	var fr wire.OffsetFetchResponse
	call(t, dial(t, b2.Addr().String()), &wire.OffsetFetchRequest{GroupID: "g", Topics: []wire.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}}, &fr)
	if got := fr.Topics[0].Partitions[0].Offset; got != 42 {
		t.Fatalf("after retention and a restart the group's committed offset is %d, want 42", got)
	}
}

// Retention never deletes committed offsets: __consumer_offsets is not compacted, so a deleted
// segment would take the only record of the offsets committed in it, and a restart would not
// find them (a broker-wide log.retention.bytes applied to it).
func TestRetentionKeepsCommittedOffsets(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.OffsetsTopicPartitions = 1
	cfg.RetentionBytes = 1
	cfg.SegmentMs = time.Millisecond
	cfg.RetentionCheck = 10 * time.Millisecond
	b := startBroker(t, cfg)
	awaitGroups(t, b)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)
	commit := func(group string, offset int64) {
		t.Helper()
		var cr wire.OffsetCommitResponse
		call(t, c, &wire.OffsetCommitRequest{GroupID: group, GenerationID: -1, Topics: []wire.OffsetCommitRequestTopic{
			{Topic: "t", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}},
		}}, &cr)
		if code := cr.Topics[0].Partitions[0].ErrorCode; code != wire.NoError {
			t.Fatalf("commit: %v", code)
		}
	}
	commit("idle", 42)
	for i := range 20 {
		time.Sleep(3 * time.Millisecond) // segment.ms is 1 ms: each commit rolls a segment
		commit("busy", int64(i))
	}
	time.Sleep(10 * cfg.RetentionCheck)
	if start := b.partition(OffsetsTopic, 0).log().StartOffset(); start != 0 {
		t.Errorf("retention moved %s-0's log start to %d", OffsetsTopic, start)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, cfg)
	awaitGroups(t, b2)
	var fr wire.OffsetFetchResponse
	call(t, dial(t, b2.Addr().String()), &wire.OffsetFetchRequest{GroupID: "idle", Topics: []wire.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}}, &fr)
	if got := fr.Topics[0].Partitions[0].Offset; got != 42 {
		t.Fatalf("after retention and a restart the group's committed offset is %d, want 42", got)
	}
}

// A topic's retention.ms=0 and retention.bytes=0 are Kafka's "delete every segment", the
// active one too (rolled away first, so the log start reaches the log end), not the defaults
// (7 days, unlimited) that segment.Options takes a 0 for. A retention.bytes of 1 keeps the
// active segment, as in Kafka: the log without it would be below the limit.
func TestZeroRetentionDeletesEverySegment(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.RetentionCheck = 10 * time.Millisecond
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	for _, tc := range []struct {
		topic, config, value string
		keepsActive          bool
	}{
		{"ms0", "retention.ms", "0", false},
		{"bytes0", "retention.bytes", "0", false},
		{"bytes1", "retention.bytes", "1", true},
	} {
		createTopic(t, c, tc.topic, 1, wire.ConfigEntry{Name: "segment.bytes", Value: strPtr("200")},
			wire.ConfigEntry{Name: tc.config, Value: strPtr(tc.value)})
		var last int64
		for i := range 5 {
			res := produce(t, c, tc.topic, 0, wire.AcksLeader, records(t, strings.Repeat("x", 100)+strconv.Itoa(i)))
			if res.ErrorCode != wire.NoError {
				t.Fatal(res.ErrorCode)
			}
			last = res.BaseOffset
		}
		want := batch.Offset(last + 1)
		if tc.keepsActive {
			want = batch.Offset(last)
		}
		l := b.partition(tc.topic, 0).log()
		deadline := time.Now().Add(5 * time.Second)
		for l.StartOffset() != want && time.Now().Before(deadline) {
			time.Sleep(cfg.RetentionCheck)
		}
		if start, end := l.StartOffset(), l.EndOffset(); start != want || end != batch.Offset(last+1) {
			t.Errorf("%s=%s: log [%d, %d), want [%d, %d)", tc.config, tc.value, start, end, want, last+1)
		}
	}
}

// ListOffsets with -3 answers the first record with the log's largest timestamp, as
// docs/protocol.md says, whatever order the timestamps came in.
func TestListOffsetsMaxTimestamp(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "maxts", 1, wire.ConfigEntry{Name: "segment.bytes", Value: strPtr("200")})
	list := func() wire.ListOffsetsResponsePartition {
		var resp wire.ListOffsetsResponse
		call(t, c, &wire.ListOffsetsRequest{ReplicaID: -1, Topics: []wire.ListOffsetsRequestTopic{{Topic: "maxts", Partitions: []wire.ListOffsetsRequestPartition{{Partition: 0, CurrentLeaderEpoch: -1, Timestamp: wire.MaxTimestamp}}}}}, &resp)
		return resp.Topics[0].Partitions[0]
	}
	if p := list(); p.ErrorCode != wire.NoError || p.Offset != -1 || p.Timestamp != -1 {
		t.Errorf("empty log: %+v, want offset -1", p)
	}
	for _, ts := range []int64{1000, 5000, 2000, 5000, 3000} { // one batch each, segments of about one batch
		bl := batch.NewBuilder(batch.DefaultBuilderOptions())
		bl.Append(&batch.Record{Timestamp: ts, Value: bytes.Repeat([]byte("v"), 100)})
		recs, _ := bl.Build()
		if res := produce(t, c, "maxts", 0, wire.AcksLeader, append([]byte(nil), recs...)); res.ErrorCode != wire.NoError {
			t.Fatal(res.ErrorCode)
		}
	}
	if p := list(); p.ErrorCode != wire.NoError || p.Offset != 1 || p.Timestamp != 5000 {
		t.Errorf("ListOffsets(max timestamp) = %+v, want offset 1, timestamp 5000", p)
	}
}

// message.timestamp.after.max.ms (1 hour by default) and message.timestamp.before.max.ms are
// enforced on CreateTime topics, as DescribeConfigs reports them: a record far in the future
// would otherwise hold its segment, and every later one, back from time retention.
func TestProduceTimestampBounds(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "deflt", 1)
	createTopic(t, c, "before", 1, wire.ConfigEntry{Name: "message.timestamp.before.max.ms", Value: strPtr("60000")})
	createTopic(t, c, "append", 1, wire.ConfigEntry{Name: "message.timestamp.type", Value: strPtr("LogAppendTime")})
	at := func(ts int64) []byte {
		bl := batch.NewBuilder(batch.DefaultBuilderOptions())
		bl.Append(&batch.Record{Timestamp: ts, Value: []byte("v")})
		recs, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), recs...)
	}
	now := time.Now().UnixMilli()
	hour := time.Hour.Milliseconds()
	for _, tc := range []struct {
		topic string
		ts    int64
		want  wire.ErrorCode
	}{
		{"deflt", now + 365*24*hour, wire.ErrInvalidTimestamp},
		{"deflt", now + 2*hour, wire.ErrInvalidTimestamp},
		{"deflt", now + hour/2, wire.NoError},
		{"deflt", now - 365*24*hour, wire.NoError},
		{"before", now - 2*60000, wire.ErrInvalidTimestamp},
		{"before", now - 1000, wire.NoError},
		{"append", now + 365*24*hour, wire.NoError},
	} {
		res := produce(t, c, tc.topic, 0, wire.AcksLeader, at(tc.ts))
		if res.ErrorCode != tc.want {
			t.Errorf("%s: timestamp now%+d ms: %v, want %v", tc.topic, tc.ts-now, res.ErrorCode, tc.want)
		}
	}
	if end := b.partition("deflt", 0).log().EndOffset(); end != 2 {
		t.Errorf("deflt holds %d records, want the 2 accepted", end)
	}
}

// A retention pass that listed a partition before its topic was deleted finds the partition's
// log closed: that is the deletion, not a failure worth a warning.
func TestRetentionOfADeletedPartitionSaysNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	logs := captureLogs(&cfg)
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "gone", 1, wire.ConfigEntry{Name: "retention.ms", Value: strPtr("1")})
	p := b.partition("gone", 0)
	if p == nil {
		t.Fatal("no partition gone-0 after its topic was created")
	}
	var dr wire.DeleteTopicsResponse
	call(t, c, &wire.DeleteTopicsRequest{Topics: []string{"gone"}, TimeoutMs: 5000}, &dr)
	if dr.Topics[0].ErrorCode != wire.NoError {
		t.Fatalf("delete: %v", dr.Topics[0].ErrorCode)
	}
	if _, err := p.log().DeleteExpired(p.highWatermark()); !errors.Is(err, segment.ErrClosed) {
		t.Fatalf("the deleted partition's log: %v, want it closed", err)
	}
	b.applyRetention(p)
	if l := logs(); strings.Contains(l, "retention") {
		t.Fatalf("retention of a deleted partition logged:\n%s", l)
	}
}

// captureLogs makes cfg's broker log into a buffer and returns what it has logged so far; the
// broker's goroutines may go on logging while the test reads.
func captureLogs(cfg *Config) func() string {
	var mu sync.Mutex
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// The broker says at start which of three states its data directory was in: new, shut down
// cleanly, or not (the logs recover from their recovery points).
func TestOpenSaysHowTheDataDirectoryWasLeft(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Broker, string) {
		t.Helper()
		cfg := testConfig(t, dir)
		logs := captureLogs(&cfg)
		b, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b, logs()
	}
	b, logs := open()
	if !strings.Contains(logs, "new data directory") {
		t.Fatalf("first start:\n%s", logs)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, logs = open()
	if !strings.Contains(logs, "previous shutdown was clean") || strings.Contains(logs, "new data directory") {
		t.Fatalf("start after a clean shutdown:\n%s", logs)
	}
	// A crash: the marker a clean Close writes is missing at the next start.
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	b, logs = open()
	defer b.Close(context.Background())
	if !strings.Contains(logs, "no clean-shutdown marker") || strings.Contains(logs, "new data directory") {
		t.Fatalf("start after a crash:\n%s", logs)
	}
}
