package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// Lines piped into `sluice produce` come back, in order, from `sluice consume --max-messages`.
func TestCLIRoundTrip(t *testing.T) {
	addr := produceTestBroker(t, "cli")
	lines := []string{"first line", "second: with a colon", "", "unicode ✓", "last"}
	if out, err := runProduceCmd(t, strings.Join(lines, "\n")+"\n", "--topic", "cli", "--broker", addr); err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	cmd := consumeCmd()
	var stdout bytes.Buffer
	cmd.SetArgs([]string{"--topic", "cli", "--broker", addr, "--from-beginning", "--max-messages", "5"})
	cmd.SetIn(strings.NewReader(""))
	cmd.SetOut(&stdout)
	cmd.SetErr(io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("consume: %v", err)
	}
	if got, want := stdout.String(), strings.Join(lines, "\n")+"\n"; got != want {
		t.Fatalf("consumed\n%q\nwant\n%q", got, want)
	}
}
