package broker

import (
	"testing"

	"github.com/sluicemq/sluice/net/wire"
)

// Produce responses are reused: an answer never carries another request's topics, partitions
// or errors (sync.Pool hands the same response back on the same processor most of the time).
func TestProduceResponsesDoNotLeak(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "clean", 1)
	for range 20 {
		corrupt := records(t, "e")
		corrupt[len(corrupt)-1] ^= 1 // fails the CRC: an error with a message
		var bad wire.ProduceResponse
		call(t, c, &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
			{Topic: "clean", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: corrupt}, {Partition: 7, Records: records(t, "c")}}},
			{Topic: "nope", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, "a")}}},
		}}, &bad)
		if len(bad.Topics) != 2 || bad.Topics[0].Partitions[0].ErrorMessage == nil || bad.Topics[0].Partitions[1].ErrorCode == wire.NoError {
			t.Fatalf("bad request answered %+v", bad)
		}
		var good wire.ProduceResponse
		call(t, c, &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
			{Topic: "clean", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, "d")}}},
		}}, &good)
		if len(good.Topics) != 1 || good.Topics[0].Topic != "clean" || len(good.Topics[0].Partitions) != 1 {
			t.Fatalf("good request answered %+v", good)
		}
		if p := good.Topics[0].Partitions[0]; p.ErrorCode != wire.NoError || p.ErrorMessage != nil || p.Partition != 0 || p.BaseOffset < 0 {
			t.Fatalf("good partition answered %+v", p)
		}
	}
}
