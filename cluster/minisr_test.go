package cluster

import (
	"errors"
	"strings"
	"testing"
)

// CheckMinInsyncReplicas refuses only a topic's own min.insync.replicas above its replication
// factor, naming both numbers.
func TestCheckMinInsyncReplicas(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides map[string]string
		rf        int
		wantErr   string
	}{
		{"no override: the broker default applies", nil, 1, ""},
		{"equal", map[string]string{"min.insync.replicas": "3"}, 3, ""},
		{"below", map[string]string{"min.insync.replicas": "2"}, 3, ""},
		{"above", map[string]string{"min.insync.replicas": "2"}, 1, "min.insync.replicas 2 is greater than the replication factor 1"},
		{"spaces", map[string]string{"min.insync.replicas": " 4 "}, 3, "min.insync.replicas 4 is greater than the replication factor 3"},
		{"other keys", map[string]string{"retention.ms": "1000"}, 1, ""},
	} {
		err := CheckMinInsyncReplicas(tc.overrides, tc.rf)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want INVALID_CONFIG saying %q", tc.name, err, tc.wantErr)
		}
	}
}

// Through the state machine: a create or an alter that sets min.insync.replicas above the
// topic's replication factor is refused and changes nothing; at or below it, and changes that
// leave it alone, apply. Entries written before the check (CheckMinISR unset: an old log being
// replayed) apply as they did, so a topic they created is still there after a restart.
func TestMinInsyncReplicasAgainstReplicationFactor(t *testing.T) {
	m := newMachine(t, 1, 2, 3)
	withMinISR := func(c *createTopicCmd, v string) *createTopicCmd {
		c.Configs, c.CheckMinISR = map[string]string{"min.insync.replicas": v}, true
		return c
	}
	m.fails(withMinISR(create("rf1", 2, 1), "2"), ErrInvalidConfig)
	if _, ok := m.md.Topic("rf1"); ok {
		t.Fatal("a refused create made the topic")
	}
	m.ok(withMinISR(create("rf2", 2, 2), "2"))
	three := create("rf3", 1, 3)
	three.ID = idOf(33)
	m.ok(withMinISR(three, "1"))
	// An explicit assignment: its replica count is the replication factor.
	pinned := withMinISR(&createTopicCmd{TopicSpec: TopicSpec{Name: "pinned", NumPartitions: -1, ReplicationFactor: -1,
		Assignment: [][]int32{{1, 2}, {2, 3}}}, ID: idOf(77)}, "3")
	m.fails(pinned, ErrInvalidConfig)

	m.fails(&alterTopicConfigsCmd{Name: "rf2", Set: map[string]string{"min.insync.replicas": "3"}, CheckMinISR: true}, ErrInvalidConfig)
	if tm, _ := m.md.Topic("rf2"); tm.Configs["min.insync.replicas"] != "2" {
		t.Fatalf("a refused alter changed the configs: %v", tm.Configs)
	}
	m.ok(&alterTopicConfigsCmd{Name: "rf3", Set: map[string]string{"min.insync.replicas": "3"}, CheckMinISR: true})

	// An old entry: created with the check unset, it applies as before; a later alter of
	// another key applies too, and one setting min.insync.replicas again is checked.
	old := create("legacy", 1, 1)
	old.Configs = map[string]string{"min.insync.replicas": "2"}
	m.ok(old)
	m.ok(&alterTopicConfigsCmd{Name: "legacy", Set: map[string]string{"retention.ms": "1000"}, CheckMinISR: true})
	m.fails(&alterTopicConfigsCmd{Name: "legacy", Set: map[string]string{"min.insync.replicas": "2"}, CheckMinISR: true}, ErrInvalidConfig)
	m.ok(&alterTopicConfigsCmd{Name: "legacy", Delete: []string{"min.insync.replicas"}, CheckMinISR: true})
}
