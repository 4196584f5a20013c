package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// TestConsumeGroupSplitsPartitions: two `sluice consume --group G` runs at once share the
// topic's four partitions (two each, range): together they print every record once, and no
// partition's records come from both.
func TestConsumeGroupSplitsPartitions(t *testing.T) {
	cfg := brokertest.Config(t.TempDir(), "127.0.0.1:0")
	cfg.GroupInitialRebalanceDelay = -1
	b := brokertest.Open(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, b.Addr().String(), "consume-group-test")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e := &consumeEnv{t: t, b: b, conn: conn, ctx: ctx}
	e.topic("split", 4)

	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 2)
	errs := make([]error, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := consumeCmd()
			var errOut bytes.Buffer
			cmd.SetOut(&outs[i])
			cmd.SetErr(&errOut)
			cmd.SetArgs([]string{"--broker", b.Addr().String(), "--topic", "split", "--group", "G", "--from-beginning",
				"--format", "%p %s\\n", "--max-messages", "10",
				"--consumer-property", "session.timeout.ms=6000", "--consumer-property", "heartbeat.interval.ms=100"})
			errs[i] = cmd.ExecuteContext(ctx)
		}()
	}
	// Records are produced once both are members, so that neither reads a partition before
	// the group splits the topic.
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var resp wire.DescribeGroupsResponse
		err := conn.Call(ctx, &wire.DescribeGroupsRequest{Groups: []string{"G"}}, &resp)
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].GroupState == "Stable" && len(resp.Groups[0].Members) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group not stable with two members: %v %+v", err, resp.Groups)
		}
		<-tick.C
	}
	for p := range int32(4) {
		e.produce("split", p, 1000, "r0", "r1", "r2", "r3", "r4")
	}
	wg.Wait()
	owner := map[string]int{}
	var all []string
	for i, out := range outs {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			p, _, _ := strings.Cut(line, " ")
			if o, ok := owner[p]; ok && o != i {
				t.Errorf("partition %s printed by both runs", p)
			}
			owner[p] = i
			all = append(all, line)
		}
	}
	slices.Sort(all)
	var want []string
	for p := range 4 {
		for r := range 5 {
			want = append(want, string(rune('0'+p))+" r"+string(rune('0'+r)))
		}
	}
	if !slices.Equal(all, want) {
		t.Errorf("printed %q, want every record once: %q", all, want)
	}
}
