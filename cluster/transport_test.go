package cluster

import (
	"errors"
	"net"
	"testing"

	"github.com/hashicorp/raft"
)

// TestTransportUnpipelined: the controller's raft transport refuses pipelined replication
// (hashicorp/raft's pipeline can deadlock a follower's replication and Raft.Shutdown; see
// transport.go) and keeps the optional interfaces raft looks for: pre-vote and Close.
func TestTransportUnpipelined(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := newMux(ln, nil)
	defer m.close()
	var trans raft.Transport = unpipelined{raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &streamLayer{m: m, addr: raftAddr(ln.Addr().String())}, MaxPool: 1,
	})}
	if p, err := trans.AppendEntriesPipeline("1", "127.0.0.1:1"); p != nil || !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("AppendEntriesPipeline = %v, %v; want no pipeline", p, err)
	}
	if _, ok := trans.(raft.WithPreVote); !ok {
		t.Error("the transport lost pre-vote")
	}
	wc, ok := trans.(raft.WithClose)
	if !ok {
		t.Fatal("the transport lost Close")
	}
	if err := wc.Close(); err != nil {
		t.Fatal(err)
	}
}
