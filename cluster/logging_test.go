package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var a hclog.Logger = newHCLogAdapter(l, slog.LevelWarn)

	a.Info("routine chatter")
	if buf.Len() != 0 || a.IsInfo() {
		t.Fatalf("info passed a warn floor: %q", buf.String())
	}
	a.Named("snapshot").With("node", 1).Warn("slow fsync", "servers", hclog.Fmt("%d voters", 3))
	out := buf.String()
	for _, want := range []string{"level=WARN", `msg="slow fsync"`, "component=raft.snapshot", "node=1", `servers="3 voters"`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in %q", want, out)
		}
	}
	if a.GetLevel() != hclog.Warn {
		t.Errorf("GetLevel %v", a.GetLevel())
	}
}
