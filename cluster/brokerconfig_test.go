package cluster

import (
	"bytes"
	"maps"
	"testing"
)

// TestAlterBrokerConfigs: the dynamic throttle rates are set and deleted per
// broker and cluster-wide, ThrottleRate resolves the broker's over the
// default, bad input is refused naming the key, and the configs survive a
// snapshot round trip.
func TestAlterBrokerConfigs(t *testing.T) {
	m := newMachine(t, 1, 2)
	m.ok(&alterBrokerConfigsCmd{Broker: "", Set: map[string]string{LeaderReplicationThrottledRate: "1000", FollowerReplicationThrottledRate: "2000"}})
	m.ok(&alterBrokerConfigsCmd{Broker: "2", Set: map[string]string{LeaderReplicationThrottledRate: "50"}})
	m.ok(&alterBrokerConfigsCmd{Broker: "7", Set: map[string]string{FollowerReplicationThrottledRate: "0"}}) // not registered yet: fine
	tests := []struct {
		broker int32
		key    string
		want   int64
	}{
		{1, LeaderReplicationThrottledRate, 1000},
		{2, LeaderReplicationThrottledRate, 50},
		{2, FollowerReplicationThrottledRate, 2000},
		{7, FollowerReplicationThrottledRate, 0}, // its own 0 over the default: no throttle
		{3, "no.such.key", 0},
	}
	for _, tt := range tests {
		if got := m.md.ThrottleRate(tt.broker, tt.key); got != tt.want {
			t.Errorf("ThrottleRate(%d, %s) = %d, want %d", tt.broker, tt.key, got, tt.want)
		}
	}
	got := m.md.BrokerConfigs("2")
	got["x"] = "y" // a copy
	if want := map[string]string{LeaderReplicationThrottledRate: "50"}; !maps.Equal(m.md.BrokerConfigs("2"), want) {
		t.Errorf("BrokerConfigs(2) = %v, want %v", m.md.BrokerConfigs("2"), want)
	}
	if m.md.BrokerConfigs("1") != nil {
		t.Error("broker 1 has configs of its own")
	}

	back, err := decodeSnapshot(bytes.NewReader(snapshotBytes(t, m.md)))
	if err != nil {
		t.Fatal(err)
	}
	checkSameState(t, back, m.md)

	v := m.md.Version()
	m.ok(&alterBrokerConfigsCmd{Broker: "2", Set: map[string]string{LeaderReplicationThrottledRate: "50"}})
	if m.md.Version() != v {
		t.Error("a no-op alter bumped the version")
	}
	m.ok(&alterBrokerConfigsCmd{Broker: "2", Delete: []string{LeaderReplicationThrottledRate}})
	if m.md.BrokerConfigs("2") != nil || m.md.ThrottleRate(2, LeaderReplicationThrottledRate) != 1000 {
		t.Errorf("after the delete: %v, rate %d", m.md.BrokerConfigs("2"), m.md.ThrottleRate(2, LeaderReplicationThrottledRate))
	}

	for _, bad := range []*alterBrokerConfigsCmd{
		{Broker: "1", Set: map[string]string{"log.retention.ms": "1"}},
		{Broker: "1", Set: map[string]string{LeaderReplicationThrottledRate: "-1"}},
		{Broker: "1", Set: map[string]string{LeaderReplicationThrottledRate: "1.5"}},
		{Broker: "1", Delete: []string{"num.io.threads"}},
		{Broker: "1", Set: map[string]string{LeaderReplicationThrottledRate: "1"}, Delete: []string{LeaderReplicationThrottledRate}},
		{Broker: "01", Set: map[string]string{LeaderReplicationThrottledRate: "1"}},
		{Broker: "-1", Set: map[string]string{LeaderReplicationThrottledRate: "1"}},
		{Broker: "b1", Set: map[string]string{LeaderReplicationThrottledRate: "1"}},
	} {
		m.fails(bad, ErrInvalidConfig)
	}
}
