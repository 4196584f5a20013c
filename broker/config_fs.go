package broker

import "github.com/sluicemq/sluice/internal/vfs"

// SetLogFS puts fsys under the partition logs (segments and indexes) and their checkpoint
// files (recovery points, leader-epoch and replication-offset checkpoints) in place of the
// operating system's file system; nil restores the default. The metadata log (meta/) and
// the ballast are not on it.
//
// It is for `sluice serve --simulate-power-loss`, which passes a vfs.PowerLossFS: the
// journal that file system keeps of what is durable lets `sluice chaos` turn a kill -9 of the
// broker into a power cut (vfs.RollBack before the restart), and its full-disk switch inject
// ENOSPC. Tests in this package set the unexported field directly.
func (c *Config) SetLogFS(fsys vfs.FS) { c.logFS = fsys }
