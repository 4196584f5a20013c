package cluster

import (
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// raftStore is raft's log and stable store (raft.db) remembering the last write that failed.
// Raft only logs such a failure ("failed to commit logs") and steps down, so a start-up on a
// full disk used to fail with "replay log: not the controller leader"; awaitReady reports this
// error instead, which names the file and the disk's error.
type raftStore struct {
	*raftboltdb.BoltStore
	path string
	// fault, when set (tests), fails writes before they reach bolt: op is "store logs",
	// "delete logs" or "set".
	fault  func(op string) error
	failed atomic.Pointer[error]
}

func (s *raftStore) write(op string, do func() error) error {
	var err error
	if s.fault != nil {
		err = s.fault(op)
	}
	if err == nil {
		err = do()
	}
	if err != nil {
		werr := fmt.Errorf("raft log %s: %s: %w", s.path, op, err)
		s.failed.Store(&werr)
	}
	return err
}

// writeErr is the last write to raft.db that failed, or nil.
func (s *raftStore) writeErr() error {
	if e := s.failed.Load(); e != nil {
		return *e
	}
	return nil
}

func (s *raftStore) StoreLog(l *raft.Log) error {
	return s.write("store logs", func() error { return s.BoltStore.StoreLog(l) })
}

func (s *raftStore) StoreLogs(logs []*raft.Log) error {
	return s.write("store logs", func() error { return s.BoltStore.StoreLogs(logs) })
}

func (s *raftStore) DeleteRange(lo, hi uint64) error {
	return s.write("delete logs", func() error { return s.BoltStore.DeleteRange(lo, hi) })
}

func (s *raftStore) Set(k, v []byte) error {
	return s.write("set", func() error { return s.BoltStore.Set(k, v) })
}

func (s *raftStore) SetUint64(k []byte, v uint64) error {
	return s.write("set", func() error { return s.BoltStore.SetUint64(k, v) })
}

var (
	_ raft.LogStore    = (*raftStore)(nil)
	_ raft.StableStore = (*raftStore)(nil)
)
