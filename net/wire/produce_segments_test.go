package wire

import (
	"bytes"
	"testing"
)

// Splicing the records into AppendSegments' output at its cuts gives exactly AppendTo.
func TestProduceRequestSegments(t *testing.T) {
	id := "tx"
	req := &ProduceRequest{TransactionalID: &id, Acks: AcksAll, TimeoutMs: 1234, Topics: []ProduceRequestTopic{
		{Topic: "a", Partitions: []ProduceRequestPartition{{Partition: 0, Records: []byte("first")}, {Partition: 3, Records: nil}}},
		{Topic: "bb", Partitions: []ProduceRequestPartition{{Partition: 1, Records: []byte{}}, {Partition: 2, Records: bytes.Repeat([]byte{7}, 300)}}},
		{Topic: "empty"},
	}}
	want := req.AppendTo([]byte("prefix"))
	buf, cuts, n := req.AppendSegments([]byte("prefix"), nil)
	if len(cuts) != 4 || n != int64(5+300) {
		t.Fatalf("cuts %v, record bytes %d", cuts, n)
	}
	var got []byte
	prev := 0
	i := 0
	for _, tp := range req.Topics {
		for _, p := range tp.Partitions {
			got = append(got, buf[prev:cuts[i]]...)
			got = append(got, p.Records...)
			prev = cuts[i]
			i++
		}
	}
	got = append(got, buf[prev:]...)
	if !bytes.Equal(got, want) {
		t.Fatalf("spliced segments differ from AppendTo:\n%x\n%x", got, want)
	}
}
