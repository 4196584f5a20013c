package chaos

import (
	"bytes"
	"testing"
	"time"
)

// FuzzCheck: any bytes read as a history and checked must give an error or a result, never a
// panic, and a result whose counts hold together.
func FuzzCheck(f *testing.F) {
	var buf bytes.Buffer
	rec := NewRecorder(&buf, time.Now())
	for i, e := range with(clean(), ok(p0, 0, 5, 5), rdAt(2, 0, p0, []int64{0, 3, 1}, "0:0", "x", "0:1"),
		Event{T: 5, Type: EvFault, ID: 1, Fault: "kill-leader"}, Event{T: 9e9, Type: EvHeal, ID: 1},
		commit("g", p0, 3, OK), committed("g", p0, 2)) {
		e.T = int64(i+1) * 3e8
		rec.Record(e)
	}
	if err := rec.Flush(); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	buf.Reset()
	for _, e := range with(sent(), assign(1, p0, 1), dl(1, p0, 2, 0, "0:0", "0:1", "0:2"), gc(1, p0, 3, 3, OK),
		dl(1, p0, 4, 3, "0:3"), crash(1, 5), assign(2, p0, 6), dl(2, p0, 7, 2, "0:2", "0:3", "0:5"),
		gc(2, p0, 8, 6, Failed), gc(2, p0, 8, 7, Refused), revoke(2, p0, 9), dl(2, p0, 10, 6, "9:9"), gcommitted(p0, 11, 6)) {
		rec.Record(e)
	}
	if err := rec.Flush(); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"type":"deliver","group":"g","c":1,"offsets":[9223372036854775807,-9223372036854775808],"values":["1:2","x"]}` + "\n" +
		`{"type":"commit","group":"g","outcome":"fail","offset":-9223372036854775808,"start":9223372036854775807}` + "\n" +
		`{"type":"committed","group":"g","offset":9223372036854775807}`))
	f.Add([]byte(`{"type":"read","offsets":[9223372036854775807,-9223372036854775808,0],"values":["1:2","3:4 ",""]}`))
	f.Add([]byte(`{"type":"send","w":-5,"seq":-1,"outcome":"ok","offset":-7}` + "\n" + `{"type":"heal","id":3}`))
	fs := FinalState{
		HighWatermarks: map[TopicPartition]int64{p0: 5, p1: 1 << 40},
		LogStarts:      map[TopicPartition]int64{p0: 0, p1: -3},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Check(func(fn func(Event) error) error { return ReadHistory(bytes.NewReader(data), fn) }, fs, CheckOptions{Ordered: true})
		if err != nil {
			return
		}
		if r.Acknowledged+r.Failed > r.Sends || r.Lost > r.Acknowledged || r.Count() < 0 {
			t.Errorf("sends %d acknowledged %d failed %d lost %d count %d", r.Sends, r.Acknowledged, r.Failed, r.Lost, r.Count())
		}
		if r.Verdict(time.Minute) == "" {
			t.Error("empty verdict")
		}
	})
}
