package broker

import (
	"strings"
	"testing"

	"github.com/sluicemq/sluice/net/wire"
)

// TestMinInsyncReplicasAboveReplicationFactor: a single broker (replication factor 1 at most)
// refuses min.insync.replicas=2 at create, validate-only create, alter and validate-only alter
// with INVALID_CONFIG naming both numbers; the default (1) and an explicit 1 are fine.
func TestMinInsyncReplicasAboveReplicationFactor(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	two := wire.ConfigEntry{Name: "min.insync.replicas", Value: new(string)}
	*two.Value = "2"
	const want = "min.insync.replicas 2 is greater than the replication factor 1"
	check := func(what string, code wire.ErrorCode, msg *string) {
		t.Helper()
		if code != wire.ErrInvalidConfig || msg == nil || !strings.Contains(*msg, want) {
			m := "<nil>"
			if msg != nil {
				m = *msg
			}
			t.Errorf("%s: %v %q, want INVALID_CONFIG saying %q", what, code, m, want)
		}
	}
	for _, validateOnly := range []bool{true, false} {
		var resp wire.CreateTopicsResponse
		call(t, c, &wire.CreateTopicsRequest{TimeoutMs: 10000, ValidateOnly: validateOnly, Topics: []wire.CreateTopicsRequestTopic{
			{Topic: "strict", NumPartitions: 1, ReplicationFactor: -1, Configs: []wire.ConfigEntry{two}},
		}}, &resp)
		check("create", resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
	}
	if _, ok := b.ctrl.Metadata().Topic("strict"); ok {
		t.Fatal("a refused create made the topic")
	}
	createTopic(t, c, "lenient", 1)
	one := "1"
	createTopic(t, c, "exact", 1, wire.ConfigEntry{Name: "min.insync.replicas", Value: &one})
	for _, validateOnly := range []bool{true, false} {
		var ac wire.AlterConfigsResponse
		call(t, c, &wire.AlterConfigsRequest{ValidateOnly: validateOnly, Resources: []wire.AlterConfigsResource{
			{ResourceType: wire.ResourceTopic, ResourceName: "lenient", Configs: []wire.ConfigEntry{two}},
		}}, &ac)
		check("alter", ac.Resources[0].ErrorCode, ac.Resources[0].ErrorMessage)
	}
	if tm, _ := b.ctrl.Metadata().Topic("lenient"); len(tm.Configs) != 0 {
		t.Fatalf("a refused alter changed the configs: %v", tm.Configs)
	}
}
