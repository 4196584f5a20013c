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
		{Topic: "several", Partitions: []ProduceRequestPartition{{Partition: 4, Batches: [][]byte{[]byte("one"), bytes.Repeat([]byte{9}, 70), []byte("three")}}}},
	}}
	want := req.AppendTo([]byte("prefix"))
	buf, cuts, n := req.AppendSegments([]byte("prefix"), nil)
	if len(cuts) != 5 || n != int64(5+300+3+70+5) {
		t.Fatalf("cuts %v, record bytes %d", cuts, n)
	}
	var got []byte
	prev := 0
	i := 0
	for _, tp := range req.Topics {
		for _, p := range tp.Partitions {
			got = append(got, buf[prev:cuts[i]]...)
			got = append(got, p.Records...)
			for _, b := range p.Batches {
				got = append(got, b...)
			}
			prev = cuts[i]
			i++
		}
	}
	got = append(got, buf[prev:]...)
	if !bytes.Equal(got, want) {
		t.Fatalf("spliced segments differ from AppendTo:\n%x\n%x", got, want)
	}
}

// Batches encode as their concatenation in Records: the broker decodes one Records either way.
func TestProduceRequestBatchesEncodeAsRecords(t *testing.T) {
	parts := [][]byte{[]byte("first batch"), bytes.Repeat([]byte{1}, 100), []byte("x")}
	withBatches := &ProduceRequest{Acks: AcksLeader, TimeoutMs: 5, Topics: []ProduceRequestTopic{
		{Topic: "t", Partitions: []ProduceRequestPartition{{Partition: 2, Batches: parts}, {Partition: 3, Records: []byte("alone")}}},
	}}
	joined := &ProduceRequest{Acks: AcksLeader, TimeoutMs: 5, Topics: []ProduceRequestTopic{
		{Topic: "t", Partitions: []ProduceRequestPartition{{Partition: 2, Records: bytes.Join(parts, nil)}, {Partition: 3, Records: []byte("alone")}}},
	}}
	enc := withBatches.AppendTo(nil)
	if want := joined.AppendTo(nil); !bytes.Equal(enc, want) {
		t.Fatalf("batches encode as\n%x\nwant\n%x", enc, want)
	}
	var got ProduceRequest
	if err := got.ReadFrom(enc); err != nil {
		t.Fatal(err)
	}
	p := got.Topics[0].Partitions[0]
	if !bytes.Equal(p.Records, bytes.Join(parts, nil)) || p.Batches != nil {
		t.Fatalf("decoded records %q, batches %q", p.Records, p.Batches)
	}
}
