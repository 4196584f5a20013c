package broker

import (
	"bytes"
	"testing"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// TestFetchAnswersEveryVersion checks the broker decodes a Fetch and FetchShared request in the
// layout its header names and answers in the same one: v0, v1 and v2 (whose request carries the
// session fields and a durable offset per partition, and whose answer a session id) read the
// same records. Before the handler took the version from the header a v2 request was read as
// v0's layout and the connection closed.
func TestFetchAnswersEveryVersion(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	transports(t, b, func(t *testing.T, c *client.Conn) {
		topic := "versions-" + t.Name()[len("TestFetchAnswersEveryVersion/"):]
		createTopic(t, c, topic, 1)
		if res := produce(t, c, topic, 0, wire.AcksLeader, records(t, "a", "b")); res.ErrorCode != wire.NoError {
			t.Fatalf("produce: %+v", res)
		}
		var first []byte
		for v := int16(0); v <= 2; v++ {
			req := &wire.FetchRequest{Version: v, ReplicaID: wire.ConsumerReplicaID, MaxBytes: 1 << 20, SessionEpoch: wire.FinalSessionEpoch,
				Topics: []wire.FetchRequestTopic{{Topic: topic, Partitions: []wire.FetchRequestPartition{
					{Partition: 0, CurrentLeaderEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20, DurableOffset: -1},
				}}}}
			resp := wire.FetchResponse{Version: v, SessionID: -7}
			call(t, c, req, &resp)
			got := resp.Topics[0].Partitions[0]
			if resp.ErrorCode != wire.NoError || got.ErrorCode != wire.NoError || got.HighWatermark != 2 || len(got.Records) == 0 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			if resp.SessionID != 0 {
				t.Fatalf("v%d: session %d for a sessionless fetch", v, resp.SessionID)
			}
			if first == nil {
				first = append([]byte(nil), got.Records...)
			} else if !bytes.Equal(got.Records, first) {
				t.Fatalf("v%d records differ from v0's", v)
			}
		}
	})
}
