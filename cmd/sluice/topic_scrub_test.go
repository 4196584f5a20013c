package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// topic describe marks a replica whose log the scrub found corrupt (a bit flipped in a sealed
// segment while the broker was down), and only that partition.
func TestTopicDescribeShowsCorruptReplica(t *testing.T) {
	dir := t.TempDir()
	cfg := brokertest.Config(dir, "127.0.0.1:0")
	cfg.ScrubBytesPerSec = -1
	b := brokertest.Open(t, cfg)
	e := &consumeEnv{t: t, b: b}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e.ctx = ctx
	conn, err := client.Dial(ctx, b.Addr().String(), "describe-test")
	if err != nil {
		t.Fatal(err)
	}
	e.conn = conn
	var resp wire.CreateTopicsResponse
	seg := "2048"
	if err := conn.Call(ctx, &wire.CreateTopicsRequest{TimeoutMs: 10000, Topics: []wire.CreateTopicsRequestTopic{{Topic: "d", NumPartitions: 2, ReplicationFactor: -1,
		Configs: []wire.ConfigEntry{{Name: "segment.bytes", Value: &seg}}}}}, &resp); err != nil || resp.Topics[0].ErrorCode != wire.NoError {
		t.Fatalf("create: %v %v", err, resp.Topics)
	}
	pad := strings.Repeat(".", 600)
	for _, v := range []string{"one", "victim", "three", "four"} {
		e.produce("d", 0, 1, v+pad)
		e.produce("d", 1, 1, v+pad)
	}
	conn.Close()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "d-0", "*.log"))
	sort.Strings(logs)
	flipped := false
	for _, path := range logs[:max(len(logs)-1, 0)] {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if at := bytes.Index(data, []byte("victim")); at >= 0 {
			data[at] ^= 0x20
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			flipped = true
		}
	}
	if !flipped {
		t.Fatalf("victim not in a sealed segment of %v", logs)
	}

	cfg.ScrubBytesPerSec = 1 << 30
	e.b = brokertest.Open(t, cfg)
	for {
		out, errOut, err := e.runCmd(topicCmd(), "describe", "d")
		if err != nil {
			t.Fatalf("describe: %v\n%s", err, errOut)
		}
		lines := strings.Split(out, "\n")
		if strings.Contains(lines[1], "\tCorrupt: 0") {
			if strings.Contains(lines[2], "Corrupt") {
				t.Fatalf("partition 1 shown corrupt:\n%s", out)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("describe never showed the corrupt replica:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond) // polling the scrub's first pass, bounded by ctx
	}
}
