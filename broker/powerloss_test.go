package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// A broker on a PowerLossFS (SetLogFS, as `sluice serve --simulate-power-loss` runs it)
// serves produce and fetch, and a power cut after it (vfs.RollBack on its journal) keeps every
// acks=all record: they were answered only once fsynced, and fsynced is what the journal says
// survives. Records answered at acks=1 and never fsynced (the disk stops taking syncs first,
// through an ErrorFS over the PowerLossFS, so the broker stops without syncing them) are
// lost by the roll back, which proves the cut is real; with a torn prefix of them kept, the
// reopened log cuts the torn batch and still holds every acknowledged record.
func TestPowerLossKeepsAcknowledgedRecords(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func() vfs.CrashOptions
	}{
		{"nothing unsynced kept", func() vfs.CrashOptions { return vfs.CrashOptions{} }},
		{"torn prefix kept", func() vfs.CrashOptions {
			return vfs.CrashOptions{Rand: rand.New(rand.NewPCG(7, 7)), KeepUnsyncedPrefix: true, TearLastPage: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			journal := filepath.Join(t.TempDir(), "journal")
			pl, err := vfs.NewPowerLossFS(journal)
			if err != nil {
				t.Fatal(err)
			}
			var noSync atomic.Bool
			cfg := testConfig(t, dir)
			cfg.SetLogFS(&vfs.ErrorFS{FS: pl, Inject: func(op vfs.Op, path string) error {
				if noSync.Load() && (op == vfs.OpSync || op == vfs.OpFlush || op == vfs.OpSyncDir) {
					return vfs.EIO
				}
				return nil
			}})
			b := startBroker(t, cfg)
			c := dial(t, b.Addr().String())
			createTopic(t, c, "t", 2)
			acked := map[int32][]string{}
			for i := range 20 {
				p := int32(i % 2)
				v := []string{fmt.Sprintf("v%d-a", i), fmt.Sprintf("v%d-b", i)}
				if res := produceRaw(t, c, "t", p, wire.AcksAll, records(t, v...)); res.ErrorCode != wire.NoError {
					t.Fatalf("acks=all produce %d: %v", i, res.ErrorCode)
				}
				acked[p] = append(acked[p], v...)
			}
			noSync.Store(true)
			unsynced := produceRaw(t, c, "t", 0, wire.AcksLeader, records(t, "lost-1", "lost-2", "lost-3"))
			_ = b.Close(context.Background()) // the syncs fail: an unclean stop
			if err := pl.Close(); err != nil {
				t.Fatal(err)
			}
			rep, err := vfs.RollBack(journal, tc.opts())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("acks=1 answer %v; roll back %+v", unsynced.ErrorCode, rep)
			if unsynced.ErrorCode == wire.NoError && rep.BytesLost == 0 {
				t.Fatalf("an acks=1 write was answered and never synced, yet the roll back lost nothing: %+v", rep)
			}

			cfg.SetLogFS(nil)
			b2 := startBroker(t, cfg)
			c2 := dial(t, b2.Addr().String())
			for p, want := range acked {
				var got []string
				for off := int64(0); ; {
					fp := fetchP(t, c2, "t", p, off, 0, 1)
					if fp.ErrorCode != wire.NoError {
						t.Fatalf("fetch t-%d at %d after the power cut: %v", p, off, fp.ErrorCode)
					}
					vals := fetchedValues(t, fp.Records)
					if len(vals) == 0 {
						break
					}
					got = append(got, vals...)
					off += int64(len(vals))
				}
				for _, v := range want {
					if !slices.Contains(got, v) {
						t.Fatalf("t-%d lost acknowledged %q after the power cut (%+v); has %v", p, v, rep, got)
					}
				}
				if tc.opts().Rand == nil && slices.Contains(got, "lost-1") {
					t.Fatalf("t-%d kept a record never synced: %v", p, got)
				}
			}
		})
	}
}
