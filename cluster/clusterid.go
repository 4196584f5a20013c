package cluster

import "fmt"

// The cluster id (Kafka's cluster.id): set once in the replicated metadata
// by the first active controller that finds none, and kept for good, so
// every broker and client sees the same id for the life of the cluster.

// maxClusterIDLen bounds a cluster id (Kafka's is a 22-character UUID).
const maxClusterIDLen = 64

func (c *initClusterCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	if c.ClusterID == "" || len(c.ClusterID) > maxClusterIDLen {
		return m, applyResult{Err: fmt.Errorf("%w: %q; want 1 to %d bytes", ErrInvalidClusterID, c.ClusterID, maxClusterIDLen)}
	}
	if m.clusterID != "" {
		return m, applyResult{} // the first id committed wins; a second controller's proposal is a no-op
	}
	next := m.clone()
	next.clusterID = c.ClusterID
	return next.finish(index), applyResult{}
}
