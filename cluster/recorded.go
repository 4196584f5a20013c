package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// RecordedNodeID reads the node id a data directory made before node ids were recorded
// elsewhere (meta.properties) was run with: the single voter of its raft configuration. It
// reports false when dir has no raft state or its configuration is not a single voter.
func RecordedNodeID(dir string) (int32, bool, error) {
	path := filepath.Join(dir, "raft.db")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: time.Second}})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			err = fmt.Errorf("locked by another process (is another broker using the data directory %s?): %w", filepath.Dir(dir), err)
		}
		return 0, false, fmt.Errorf("cluster: open %s: %w", path, err)
	}
	defer bolt.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, newHCLogAdapter(slog.New(slog.DiscardHandler), slog.LevelError))
	if err != nil {
		return 0, false, fmt.Errorf("cluster: snapshot store: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = "probe"
	rc.Logger = newHCLogAdapter(slog.New(slog.DiscardHandler), slog.LevelError)
	_, trans := raft.NewInmemTransport("probe")
	cf, err := raft.GetConfiguration(rc, newFSM(func() {}), bolt, bolt, snaps, trans)
	if err != nil {
		return 0, false, fmt.Errorf("cluster: read the raft configuration in %s: %w", dir, err)
	}
	if len(cf.Servers) != 1 {
		return 0, false, nil
	}
	id, err := strconv.ParseInt(string(cf.Servers[0].ID), 10, 32)
	if err != nil {
		return 0, false, nil
	}
	return int32(id), true, nil
}
