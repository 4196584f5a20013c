//go:build linux || darwin || freebsd

package broker

import "golang.org/x/sys/unix"

// statSpace reads the space of the filesystem holding dir with statfs(2): free is f_bavail
// (what an unprivileged process may still allocate, which is what the broker may), total
// f_blocks, in f_bsize units.
func statSpace(dir string) (spaceStat, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return spaceStat{}, err
	}
	bs := int64(st.Bsize) //nolint:unconvert // int32, uint32 or int64 by platform
	return spaceStat{free: int64(st.Bavail) * bs, total: int64(st.Blocks) * bs}, nil
}
