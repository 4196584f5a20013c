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
	// appendFailures counts the log appends that failed since the last one that succeeded.
	appendFailures atomic.Int32
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
	if op == opStoreLogs {
		if err != nil {
			s.appendFailures.Add(1)
		} else {
			s.appendFailures.Store(0)
		}
	}
	return err
}

// opStoreLogs names a log append in errors (and in fault).
const opStoreLogs = "store logs"

// appendsFailing is writeErr once a log append failed and raft's next attempt failed too: the
// raft log cannot be written, and elections will go on failing. A single failure may be a
// passing one (a disk that something is freeing) that raft's next election gets past.
func (s *raftStore) appendsFailing() error {
	if s.appendFailures.Load() < 2 {
		return nil
	}
	return s.writeErr()
}

// writeErr is the last write to raft.db that failed, or nil.
func (s *raftStore) writeErr() error {
	if e := s.failed.Load(); e != nil {
		return *e
	}
	return nil
}

func (s *raftStore) StoreLog(l *raft.Log) error {
	return s.write(opStoreLogs, func() error { return s.BoltStore.StoreLog(l) })
}

func (s *raftStore) StoreLogs(logs []*raft.Log) error {
	return s.write(opStoreLogs, func() error { return s.BoltStore.StoreLogs(logs) })
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
