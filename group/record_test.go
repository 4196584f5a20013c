package group

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

func stableGroup(t *testing.T) *Group {
	t.Helper()
	now := time.UnixMilli(1_700_000_000_000)
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	n := 0
	cfg.NewMemberID = func(c string) string { n++; return c + "-" + string(rune('0'+n)) }
	g := New("g", cfg, now)
	id, _, _ := g.Join(now, JoinRequest{InstanceID: "i", ClientID: "c", ClientHost: "h", SessionTimeout: 10 * time.Second,
		RebalanceTimeout: time.Minute, ProtocolType: "consumer", Protocols: []Protocol{{"range", []byte{1, 2}}}})
	if resp, _ := g.Sync(now, SyncRequest{MemberID: id, InstanceID: "i", Generation: 1, Assignments: map[string][]byte{id: {9}}}); resp != nil {
		t.Fatalf("sync: %+v", resp)
	}
	return g
}

func TestSnapshotLayout(t *testing.T) {
	g := stableGroup(t)
	rec := g.Snapshot(time.Time{})
	want := "0003" + "0008" + hex.EncodeToString([]byte("consumer")) + "00000001" +
		"0005" + hex.EncodeToString([]byte("range")) + "0003" + hex.EncodeToString([]byte("c-1")) +
		"0000018bcfe56800" + "00000001" +
		"0003" + hex.EncodeToString([]byte("c-1")) + "0001" + hex.EncodeToString([]byte("i")) +
		"0001" + hex.EncodeToString([]byte("c")) + "0001" + hex.EncodeToString([]byte("h")) +
		"0000ea60" + "00002710" + "00000002" + "0102" + "00000001" + "09"
	if got := hex.EncodeToString(rec.Value); got != want {
		t.Fatalf("value\n got %s\nwant %s", got, want)
	}
	if got := hex.EncodeToString(EncodeKey("g")); got != "00020001"+hex.EncodeToString([]byte("g")) {
		t.Fatalf("key %s", got)
	}
	r, err := Restore("g", g.cfg, rec.Value, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if r.State() != Stable || r.Generation() != 1 || r.Leader() != "c-1" || r.Protocol() != "range" ||
		!bytes.Equal(r.Snapshot(time.Time{}).Value, rec.Value) {
		t.Fatalf("restored %v gen %d leader %s", r.State(), r.Generation(), r.Leader())
	}
	// The restored static member keeps its instance: a restart with the old id is fenced.
	if c, _ := r.Heartbeat(time.Time{}, "other", "i", 1); c != wire.ErrFencedInstanceID {
		t.Fatalf("heartbeat: %v", c)
	}
}

func TestDecodeKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    []byte
		group string
		ok    bool
		err   error
	}{
		{"group key", EncodeKey("grp"), "grp", true, nil},
		{"offset key v0", []byte{0, 0, 0, 1, 'g'}, "", false, nil},
		{"offset key v1", []byte{0, 1, 0, 1, 'g'}, "", false, nil},
		{"unknown version", []byte{0, 3, 0, 0}, "", false, ErrRecordVersion},
		{"short", []byte{0}, "", false, ErrShortRecord},
		{"short string", []byte{0, 2, 0, 5, 'g'}, "", false, ErrShortRecord},
		{"trailing", append(EncodeKey("g"), 0), "", false, ErrTrailingBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ok, err := DecodeKey(tc.in)
			if g != tc.group || ok != tc.ok || !errors.Is(err, tc.err) {
				t.Fatalf("got %q %v %v, want %q %v %v", g, ok, err, tc.group, tc.ok, tc.err)
			}
		})
	}
}

func TestRestoreRefuses(t *testing.T) {
	good := stableGroup(t).Snapshot(time.Time{}).Value
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"version", append([]byte{0, 4}, good[2:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte(nil), good...), 0)},
		{"empty", []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Restore("g", DefaultConfig(), tc.in, time.Time{}); err == nil {
				t.Fatal("restored")
			}
		})
	}
	g, err := Restore("g", DefaultConfig(), nil, time.Time{})
	if err != nil || g.State() != Empty {
		t.Fatalf("tombstone: %v %v", g, err)
	}
}

func FuzzRestore(f *testing.F) {
	f.Add(stableGroup(&testing.T{}).Snapshot(time.Time{}).Value)
	f.Add(New("g", DefaultConfig(), time.Time{}).Snapshot(time.Time{}).Value)
	f.Add([]byte{0, 0, 0, 1, 'c', 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Restore("g", DefaultConfig(), b, time.Time{})
		if err != nil {
			return
		}
		// What restores re-encodes (at v3) and restores to the same snapshot.
		v := g.Snapshot(time.Time{}).Value
		g2, err := Restore("g", DefaultConfig(), v, time.Time{})
		if err != nil {
			t.Fatalf("re-encoded snapshot: %v", err)
		}
		if !bytes.Equal(g2.Snapshot(time.Time{}).Value, v) {
			t.Fatal("snapshot changed on restore")
		}
		g.Tick(time.Time{}.Add(time.Hour))
		g.Describe()
	})
}

func FuzzDecodeKey(f *testing.F) {
	f.Add(EncodeKey("g"))
	f.Add([]byte{0, 1, 0, 1, 'g'})
	f.Fuzz(func(t *testing.T, b []byte) {
		g, ok, err := DecodeKey(b)
		if ok && (err != nil || !bytes.Equal(EncodeKey(g), b)) {
			t.Fatalf("%q %v %v", g, ok, err)
		}
	})
}

func TestZeroConfigAcceptsSessions(t *testing.T) {
	g := New("g", Config{}, time.Time{})
	id, resp, _ := g.Join(time.Time{}, JoinRequest{SessionTimeout: 45 * time.Second, ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "range"}}})
	if resp == nil || resp.Err != wire.ErrMemberIDRequired || id == "" {
		t.Fatalf("join: %q %+v", id, resp)
	}
}

func TestStateNames(t *testing.T) {
	for s, want := range map[State]string{Empty: "Empty", PreparingRebalance: "PreparingRebalance",
		CompletingRebalance: "CompletingRebalance", Stable: "Stable", Dead: "Dead"} {
		if s.String() != want {
			t.Errorf("%d: %s", s, s)
		}
	}
}
