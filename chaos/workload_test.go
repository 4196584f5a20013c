package chaos

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestParseWorkload: a workload file's fields are read, durations as Go duration strings;
// unknown fields are refused naming the field, bad JSON naming its byte offset, a value of
// the wrong type naming its field, and the zero fields take the defaults.
func TestParseWorkload(t *testing.T) {
	w, err := ParseWorkload([]byte(`{"topics": 3, "rate": 50, "reread_interval": "2s", "delivery_timeout": "1m"}`))
	if err != nil {
		t.Fatal(err)
	}
	if w.Topics != 3 || w.Rate != 50 || time.Duration(w.RereadInterval) != 2*time.Second || time.Duration(w.DeliveryTimeout) != time.Minute {
		t.Fatalf("parsed %+v", w)
	}
	d, err := w.WithDefaults(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Idempotence == nil || !*d.Idempotence {
		t.Fatalf("idempotence defaults to %v, want true", d.Idempotence)
	}
	if d.GroupConsumers == nil || *d.GroupConsumers != 3 {
		t.Fatalf("group consumers default to %v, want 3", d.GroupConsumers)
	}
	want := Workload{Topics: 3, Partitions: 4, ReplicationFactor: 3, MinInsyncReplicas: 2, Writers: 4, Rate: 50, RecordSize: 100,
		Idempotence: d.Idempotence, MaxInFlight: 5, Readers: 2, RereadInterval: Duration(2 * time.Second), DeliveryTimeout: Duration(time.Minute),
		GroupConsumers: d.GroupConsumers, GroupAssignor: "cooperative-sticky", GroupCrashInterval: Duration(15 * time.Second)}
	if d != want {
		t.Fatalf("with defaults:\n got %+v\nwant %+v", d, want)
	}
	if got := strings.Join(d.TopicNames(), ","); got != "chaos-0,chaos-1,chaos-2" {
		t.Fatalf("topic names %s", got)
	}

	for _, tc := range []struct{ name, in, want string }{
		{"unknown field", `{"topics": 1, "partitons": 2}`, `unknown field "partitons"`},
		{"bad JSON", `{"topics": 1,, "rate": 2}`, "byte offset 14"},
		{"wrong type", `{"topics": "two"}`, `field "topics"`},
		{"duration as a number", `{"reread_interval": 10}`, `a duration is a string such as "30s", not 10`},
		{"bad duration", `{"delivery_timeout": "ten seconds"}`, `duration "ten seconds"`},
		{"trailing data", `{"topics": 1} {"topics": 2}`, "after the workload object"},
		{"empty", ``, "empty file"},
		{"truncated", `{"topics": 1`, "unexpected end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWorkload([]byte(tc.in))
			if !errors.Is(err, ErrWorkload) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseWorkload(%s): %v, want an ErrWorkload saying %q", tc.in, err, tc.want)
			}
		})
	}
}

// TestWorkloadIdempotence: idempotent writers (the default) keep 5 requests in flight and
// hold the run to no duplicates and to order; without idempotence one request in flight, which
// promises order but not the absence of duplicates; more than 5 with idempotence is refused.
func TestWorkloadIdempotence(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name        string
		in          Workload
		maxInFlight int
		opts        CheckOptions
	}{
		{"default", Workload{}, 5, CheckOptions{Idempotent: true, Ordered: true}},
		{"idempotent, 2 in flight", Workload{MaxInFlight: 2}, 2, CheckOptions{Idempotent: true, Ordered: true}},
		{"not idempotent", Workload{Idempotence: &off}, 1, CheckOptions{Ordered: true}},
		{"not idempotent, 5 in flight", Workload{Idempotence: &off, MaxInFlight: 5}, 5, CheckOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := tc.in.WithDefaults(3, 0)
			if err != nil {
				t.Fatal(err)
			}
			if w.MaxInFlight != tc.maxInFlight || w.CheckOptions() != tc.opts {
				t.Fatalf("max in flight %d, check options %+v; want %d, %+v", w.MaxInFlight, w.CheckOptions(), tc.maxInFlight, tc.opts)
			}
		})
	}
	if _, err := (Workload{MaxInFlight: 6}).WithDefaults(3, 0); !errors.Is(err, ErrWorkload) || !strings.Contains(err.Error(), "max_in_flight 6") {
		t.Fatalf("6 in flight with idempotence: %v, want an ErrWorkload naming max_in_flight 6", err)
	}
	w, err := ParseWorkload([]byte(`{"idempotence": false}`))
	if err != nil || w.Idempotent() {
		t.Fatalf(`{"idempotence": false} parsed as idempotent %v (%v)`, w.Idempotent(), err)
	}
}

// TestWorkloadDefaultsAndLimits: the defaults shrink to a small cluster where they must (a
// replication factor of 3 from one broker), a run's reread interval is a tenth of it (at
// least 10 s), and values the cluster cannot honour are refused naming them.
func TestWorkloadDefaultsAndLimits(t *testing.T) {
	one, err := Workload{}.WithDefaults(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if one.ReplicationFactor != 1 || one.MinInsyncReplicas != 1 {
		t.Fatalf("one broker: replication factor %d, min ISR %d", one.ReplicationFactor, one.MinInsyncReplicas)
	}
	for runFor, want := range map[time.Duration]time.Duration{0: 10 * time.Second, 30 * time.Second: 10 * time.Second, 10 * time.Minute: time.Minute} {
		w, err := Workload{}.WithDefaults(3, runFor)
		if err != nil {
			t.Fatal(err)
		}
		if time.Duration(w.RereadInterval) != want {
			t.Errorf("run of %v: reread interval %v, want %v", runFor, time.Duration(w.RereadInterval), want)
		}
	}
	for _, tc := range []struct {
		name    string
		w       Workload
		brokers int
		want    string
	}{
		{"RF over the brokers", Workload{ReplicationFactor: 5}, 3, "replication_factor 5 exceeds the 3 brokers"},
		{"min ISR over RF", Workload{ReplicationFactor: 2, MinInsyncReplicas: 3}, 3, "min_insync_replicas 3 exceeds replication_factor 2"},
		{"min ISR over the default RF", Workload{MinInsyncReplicas: 4}, 3, "min_insync_replicas 4 exceeds replication_factor 3"},
		{"negative", Workload{Writers: -1}, 3, "writers -1 is negative"},
		{"no brokers", Workload{}, 0, "a cluster of 0 brokers"},
		{"record too small for its value", Workload{RecordSize: 8}, 3, "record_size 8: a record must hold its value"},
		{"negative group consumers", Workload{GroupConsumers: new(-1)}, 3, "group_consumers -1 is negative"},
		{"unknown assignor", Workload{GroupAssignor: "sticky"}, 3, `group_assignor "sticky": want cooperative-sticky, range, roundrobin`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.w.WithDefaults(tc.brokers, time.Minute)
			if !errors.Is(err, ErrWorkload) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%+v on %d brokers: %v, want an ErrWorkload saying %q", tc.w, tc.brokers, err, tc.want)
			}
		})
	}
}

// TestWorkloadGroupConsumers: three group consumers by default when there are two
// partitions or more, none with one; 0 in the file turns them off and a number is held to;
// the assignor is read from the file.
func TestWorkloadGroupConsumers(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       int
		assignor   string
	}{
		{"default", `{}`, 3, "cooperative-sticky"},
		{"one partition", `{"topics": 1, "partitions": 1}`, 0, "cooperative-sticky"},
		{"off", `{"group_consumers": 0}`, 0, "cooperative-sticky"},
		{"five, range", `{"group_consumers": 5, "group_assignor": "range"}`, 5, "range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := ParseWorkload([]byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if w, err = w.WithDefaults(3, time.Minute); err != nil {
				t.Fatal(err)
			}
			if w.Groups() != tc.want || w.GroupAssignor != tc.assignor {
				t.Fatalf("%s: %d group consumers with %s, want %d with %s", tc.file, w.Groups(), w.GroupAssignor, tc.want, tc.assignor)
			}
		})
	}
}

// TestDurationJSON: a Duration writes as the string it reads from.
func TestDurationJSON(t *testing.T) {
	b, err := Duration(90 * time.Second).MarshalJSON()
	if err != nil || string(b) != `"1m30s"` {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	var d Duration
	if err := d.UnmarshalJSON(b); err != nil || d != Duration(90*time.Second) {
		t.Fatalf("unmarshal: %v, %v", time.Duration(d), err)
	}
	if err := d.UnmarshalJSON([]byte(`"-1s"`)); err == nil {
		t.Fatal("a negative duration was taken")
	}
}
