package cluster

import "github.com/hashicorp/raft"

// unpipelined is raft's NetworkTransport without pipelined replication. hashicorp/raft's
// pipeline can deadlock (seen in hashicorp/raft v1.7.3 under sluice chaos, and by
// grafana/pyroscope#5518): once its response decoder stops (a follower's failed append, a
// connection that stalled behind a one-way loss), the next pipelined send parks on the
// pipeline's in-progress channel forever. That replication goroutine then never returns, so
// the follower gets no more entries while heartbeats still reach it (it is fenced for not
// catching up, restarts change nothing), and Raft.Shutdown waits for the goroutine forever
// (a SIGTERM that never stops the broker). Without a pipeline, raft sends one AppendEntries
// at a time per follower, each bounded by the transport's timeout: the metadata log's rate
// is far below what that carries. Every other method, and the optional interfaces raft looks
// for (WithClose, WithPreVote), are the embedded transport's.
type unpipelined struct{ *raft.NetworkTransport }

// AppendEntriesPipeline tells raft to replicate without a pipeline.
func (unpipelined) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}
