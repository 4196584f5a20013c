package broker

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// Produce requests sent back to back on one connection land in the order sent, whether the
// connection's reader appended them or, being large, its overlap goroutine did while the
// reader read on (acks=0: the client does not wait between them; then one acks=1 request).
func TestPipelinedLargeAndSmallProducesLandInOrder(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	transports(t, b, func(t *testing.T, c *client.Conn) {
		topic := "overlap-" + t.Name()[len("TestPipelinedLargeAndSmallProducesLandInOrder/"):]
		createTopic(t, c, topic, 1)
		value := func(i int) []byte {
			size := 10
			if i%3 != 2 { // two large requests, then a small one
				size = 100 << 10
			}
			v := bytes.Repeat([]byte{byte(i)}, size)
			return fmt.Appendf(v[:0], "%04d", i)[:size]
		}
		const n = 30
		for i := range n {
			req := &wire.ProduceRequest{Acks: wire.AcksNone, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
				{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, string(value(i)))}}},
			}}
			if err := c.Send(req); err != nil {
				t.Fatal(err)
			}
		}
		if res := produce(t, c, topic, 0, wire.AcksLeader, records(t, "last")); res.ErrorCode != wire.NoError || res.BaseOffset != n {
			t.Fatalf("produce after %d pipelined: %+v, want offset %d", n, res, n)
		}
		var got []string
		for int64(len(got)) < n {
			p := fetchP(t, c, topic, 0, int64(len(got)), 0, 1)
			if p.ErrorCode != wire.NoError || len(p.Records) == 0 {
				t.Fatalf("fetch at %d: %+v", len(got), p.ErrorCode)
			}
			got = append(got, fetchedValues(t, p.Records)...)
		}
		for i := range n {
			if got[i] != string(value(i)) {
				t.Fatalf("offset %d holds the value of request %.4s, want %04d", i, got[i], i)
			}
		}
	})
	if st := b.srv.Stats(); st.Overlapped == 0 {
		t.Errorf("no request went to the overlap goroutine: %+v", st)
	}
}

// A request the broker refuses by closing the connection (malformed body, unsupported
// version: the connection goes and nothing else is touched) lets none of the produces
// pipelined behind it be appended, also when it is large enough (>= 64 KiB) to be served on
// the overlap goroutine while the reader reads on. Each probe is a fresh connection; the
// reader reads ahead almost every time. (Found in review: they were appended.)
func TestRefusedLargeRequestStopsPipelinedProduces(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	const topic = "refused"
	createTopic(t, c, topic, 1)

	frame := func(h wire.RequestHeader, body []byte) []byte {
		buf, start := wire.BeginFrame(nil)
		buf = h.AppendTo(buf)
		buf = append(buf, body...)
		if err := wire.FinishFrame(buf, start, 0); err != nil {
			t.Fatal(err)
		}
		return buf
	}
	produceFrame := func(corr int32, value string) []byte {
		req := &wire.ProduceRequest{Acks: wire.AcksNone, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
			{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, value)}}},
		}}
		return frame(wire.RequestHeader{APIKey: wire.Produce, CorrelationID: corr, ClientID: "refused"}, req.AppendTo(nil))
	}
	for probe := range 10 {
		var frames []byte
		// Produce v7 is not supported: Serve calls c.Close and returns nil.
		frames = append(frames, frame(wire.RequestHeader{APIKey: wire.Produce, APIVersion: 7, CorrelationID: 1, ClientID: "refused"}, make([]byte, 100<<10))...)
		frames = append(frames, produceFrame(2, "small behind a refused request")...)
		frames = append(frames, produceFrame(3, string(bytes.Repeat([]byte("L"), 80<<10)))...)
		nc, err := net.Dial("tcp", b.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(frames); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, nc) // until the broker closes it
		nc.Close()
		if end := b.partition(topic, 0).log().EndOffset(); end != 0 {
			t.Fatalf("probe %d: %d records appended from requests pipelined behind one that closed the connection", probe, end)
		}
	}
}
