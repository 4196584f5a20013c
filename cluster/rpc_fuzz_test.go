package cluster

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// The controller RPC reads frames from anyone who can reach the CONTROLLER listener. Neither
// the server (serveRPC: readFrame, then handle) nor the client (readFrame of a response, then
// codeError) may panic on what arrives, and the server answers every frame it could read with
// a frame the client can read.

// fuzzConn is a connection whose peer sent in and reads what the server writes to out.
type fuzzConn struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (c *fuzzConn) Read(p []byte) (int, error)       { return c.in.Read(p) }
func (c *fuzzConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *fuzzConn) Close() error                     { return nil }
func (c *fuzzConn) LocalAddr() net.Addr              { return raftAddr("127.0.0.1:1") }
func (c *fuzzConn) RemoteAddr() net.Addr             { return raftAddr("127.0.0.1:2") }
func (c *fuzzConn) SetDeadline(time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(time.Time) error { return nil }

func frameOf(tb testing.TB, v any) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := writeFrame(&b, v); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func FuzzControllerRPC(f *testing.F) {
	cfg := testConfig(f.TempDir())
	cfg.ApplyTimeout = 2 * time.Second
	c, err := Open(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })

	create, _ := encodeCommand(&createTopicCmd{TopicSpec: TopicSpec{Name: "t", NumPartitions: 1, ReplicationFactor: 1}, ID: idOf(20)})
	broker := &BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 9092}
	for _, req := range []rpcRequest{
		{Op: opStatus},
		{Op: opPropose, Command: create},
		{Op: opPropose, Command: create[:len(create)/2]},
		{Op: opPropose},
		{Op: opRegister, Broker: broker, Incarnation: "inc"},
		{Op: opRegister},
		{Op: opRegister, Broker: &BrokerInfo{ID: -1}},
		{Op: opHeartbeat, BrokerID: 1, Incarnation: "inc", Epoch: 3, Applied: 1 << 62},
		{Op: opHeartbeat, BrokerID: 7},
		{Op: opJoin},
		{Op: "nonsense", TimeoutMs: -5},
		{Op: opStatus, TimeoutMs: 1 << 62},
	} {
		f.Add(frameOf(f, &req))
	}
	two := append(frameOf(f, &rpcRequest{Op: opStatus}), frameOf(f, &rpcRequest{Op: opHeartbeat, BrokerID: 1})...)
	f.Add(two)
	for _, b := range [][]byte{
		nil,
		{0, 0},
		{0, 0, 0, 0},
		{0, 0, 0, 4, 'n', 'u', 'l', 'l'},
		{0, 0, 0, 2, '[', ']'},
		{0xff, 0xff, 0xff, 0xff},
		{0, 0, 0, 9, '{', '"', 'o', 'p', '"', ':', '1', '}', '}'},
		frameOf(f, map[string]any{"op": "propose", "command": "AQ=="}),
		frameOf(f, map[string]any{"code": 12, "message": "x", "leader_id": 3}),
		frameOf(f, map[string]any{"code": -7, "topic": map[string]any{"partitions": []any{nil}}}),
	} {
		f.Add(b)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		// As a response, on the client side.
		var resp rpcResponse
		if err := readFrame(bytes.NewReader(data), &resp); err == nil {
			_ = codeError(resp.Code, resp.Message)
		}
		// As requests, on the server side: one answer per frame read.
		frames := 0
		for r := bytes.NewReader(data); ; frames++ {
			var req rpcRequest
			if readFrame(r, &req) != nil {
				break
			}
		}
		conn := &fuzzConn{in: bytes.NewReader(data)}
		c.serveRPC(conn)
		for i := range frames {
			var resp rpcResponse
			if err := readFrame(&conn.out, &resp); err != nil {
				t.Fatalf("answer %d of %d: %v", i, frames, err)
			}
			if err := codeError(resp.Code, resp.Message); err != nil && resp.Message == "" {
				t.Fatalf("answer %d: error code %d without a message", i, resp.Code)
			}
		}
		if rest, _ := io.ReadAll(&conn.out); len(rest) != 0 {
			t.Fatalf("%d bytes written after the %d answers", len(rest), frames)
		}
	})
}
