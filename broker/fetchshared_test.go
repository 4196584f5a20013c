//go:build unix

package broker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// fetchShared sends one FetchShared for the given partitions (all from offset, PartitionMaxBytes
// 1 MiB) and returns the response, with its records copied.
func fetchShared(t *testing.T, c *client.Conn, topic string, parts []int32, offset int64, spanMax, minBytes int32) wire.FetchSharedResponse {
	t.Helper()
	req := wire.FetchSharedRequest{FetchRequest: wire.FetchRequest{ReplicaID: -1, MinBytes: minBytes, MaxBytes: 50 << 20, MaxWaitMs: 20000,
		Topics: []wire.FetchRequestTopic{{Topic: topic}}}, SpanMaxBytes: spanMax}
	for _, p := range parts {
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, wire.FetchRequestPartition{
			Partition: p, FetchOffset: offset, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1})
	}
	var resp wire.FetchSharedResponse
	call(t, c, &req, &resp)
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			p := &resp.Topics[ti].Partitions[pi]
			p.Records = append([]byte(nil), p.Records...)
		}
	}
	return resp
}

// readSpan opens a span's file as a client would, checks that it is the file the span names,
// and returns the span's bytes.
func readSpan(t *testing.T, sp wire.FileSpan) []byte {
	t.Helper()
	if !filepath.IsAbs(sp.Path) {
		t.Fatalf("span path %q is not absolute", sp.Path)
	}
	f, err := os.Open(sp.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if uint64(st.Dev) != sp.Dev || uint64(st.Ino) != sp.Ino { //nolint:unconvert // Dev is int32 on darwin
		t.Fatalf("span names dev %d ino %d; its path leads to dev %d ino %d", sp.Dev, sp.Ino, st.Dev, st.Ino)
	}
	b := make([]byte, sp.Len)
	if _, err := f.ReadAt(b, sp.Pos); err != nil {
		t.Fatal(err)
	}
	return b
}

// fillPartition appends n batches of 10 records of 1 KiB each to topic's partition.
func fillPartition(t *testing.T, c *client.Conn, topic string, partition int32, n int) {
	t.Helper()
	for i := range n {
		vals := make([]string, 10)
		for j := range vals {
			vals[j] = fmt.Sprintf("%d-%d-%s", i, j, strings.Repeat("v", 1000))
		}
		if r := produce(t, c, topic, partition, 1, records(t, vals...)); r.ErrorCode != wire.NoError {
			t.Fatal(r.ErrorCode)
		}
	}
}

func TestFetchSharedAnswersWithSpans(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	tcp := dial(t, b.Addr().String())
	unixConn := dial(t, "unix://"+b.UnixAddr().String())
	createTopic(t, tcp, "big", 3)
	fillPartition(t, tcp, "big", 1, 30) // about 300 KiB: a span
	fillPartition(t, tcp, "big", 2, 2)  // about 20 KiB: inline, below sharedSpanMin

	resp := fetchShared(t, unixConn, "big", []int32{0, 1, 2}, 0, 1<<30, 1)
	if resp.ErrorCode != wire.NoError || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("response %+v", resp)
	}
	if len(resp.Spans) != 1 || resp.Spans[0].Index != 1 {
		t.Fatalf("spans %+v, want one for the partition at index 1", resp.Spans)
	}
	parts := resp.Topics[0].Partitions
	if len(parts[1].Records) != 0 {
		t.Errorf("the spanned partition also carried %d bytes inline", len(parts[1].Records))
	}
	// The span holds exactly what Fetch sends for the partition (all of it fits in 1 MiB).
	spanned := readSpan(t, resp.Spans[0])
	if plain := fetchP(t, tcp, "big", 1, 0, 0, 1); !bytes.Equal(spanned, plain.Records) {
		t.Errorf("span: %d bytes; Fetch: %d bytes, not the same", len(spanned), len(plain.Records))
	}
	if got := fetchedValues(t, spanned); len(got) != 300 || !strings.HasPrefix(got[299], "29-9-") {
		t.Errorf("span decodes to %d records", len(got))
	}
	if parts[1].HighWatermark != 300 || parts[2].HighWatermark != 20 {
		t.Errorf("high watermarks %d, %d", parts[1].HighWatermark, parts[2].HighWatermark)
	}
	if plain := fetchP(t, tcp, "big", 2, 0, 0, 1); !bytes.Equal(parts[2].Records, plain.Records) || len(plain.Records) == 0 {
		t.Errorf("small partition inline: %d bytes; Fetch: %d", len(parts[2].Records), len(plain.Records))
	}
	if len(parts[0].Records) != 0 || parts[0].ErrorCode != wire.NoError {
		t.Errorf("empty partition: %d bytes, %v", len(parts[0].Records), parts[0].ErrorCode)
	}

	// SpanMaxBytes bounds a span as PartitionMaxBytes bounds records: whole batches below it,
	// plus at most a partial one.
	resp = fetchShared(t, unixConn, "big", []int32{1}, 100, 100<<10, 1)
	if len(resp.Spans) != 1 || resp.Spans[0].Len != 100<<10 {
		t.Fatalf("spans with SpanMaxBytes 100 KiB: %+v", resp.Spans)
	}
	if got := fetchedValues(t, readSpan(t, resp.Spans[0])); len(got) == 0 || !strings.HasPrefix(got[0], "10-0-") {
		t.Errorf("span from offset 100 starts with %.8q", got)
	}

	// Near the log's end less than sharedSpanMin is left: inline, as Fetch.
	resp = fetchShared(t, unixConn, "big", []int32{1}, 290, 1<<30, 1)
	if len(resp.Spans) != 0 || len(resp.Topics[0].Partitions[0].Records) == 0 {
		t.Errorf("tail read: %d spans, %d bytes inline", len(resp.Spans), len(resp.Topics[0].Partitions[0].Records))
	}

	// A span counts towards minBytes: this answers at once instead of waiting out maxWait
	// (20 s).
	start := time.Now()
	resp = fetchShared(t, unixConn, "big", []int32{1}, 0, 1<<30, 200<<10)
	if len(resp.Spans) != 1 || time.Since(start) > 10*time.Second {
		t.Errorf("minBytes 200 KiB: spans %+v after %v", resp.Spans, time.Since(start))
	}

	// Over TCP the paths would mean nothing to a remote client: refused.
	var refused wire.FetchSharedResponse
	call(t, tcp, &wire.FetchSharedRequest{FetchRequest: wire.FetchRequest{ReplicaID: -1, Topics: []wire.FetchRequestTopic{
		{Topic: "big", Partitions: []wire.FetchRequestPartition{{Partition: 1, PartitionMaxBytes: 1 << 20}}}}}, SpanMaxBytes: 1 << 30}, &refused)
	if refused.ErrorCode != wire.ErrInvalidRequest || len(refused.Spans) != 0 {
		t.Errorf("FetchShared over TCP: %v, %d spans", refused.ErrorCode, len(refused.Spans))
	}

	// Errors are Fetch's.
	resp = fetchShared(t, unixConn, "big", []int32{1}, 5000, 1<<30, 1)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != wire.ErrOffsetOutOfRange || len(resp.Spans) != 0 {
		t.Errorf("offset past the end: %v, %d spans", code, len(resp.Spans))
	}
}
