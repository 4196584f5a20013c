//go:build linux

package report

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// detectPlatform fills the memory (/proc/meminfo), the kernel (uname) and the data
// directory's file system type (statfs).
func detectPlatform(m *Machine) {
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemoryBytes = parseMemTotal(b)
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	if m.Dir != "" {
		var st unix.Statfs_t
		if unix.Statfs(m.Dir, &st) == nil {
			m.Filesystem = fsTypeName(int64(st.Type))
		}
	}
}

// parseMemTotal returns the MemTotal line's value in bytes, 0 if absent.
func parseMemTotal(meminfo []byte) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("MemTotal:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		kb, _ := strconv.ParseUint(string(f[0]), 10, 64)
		return kb * 1024
	}
	return 0
}

// fsTypes names the statfs magic numbers (linux/magic.h) of the file systems a broker's data
// directory is likely to sit on.
var fsTypes = map[int64]string{
	0xef53:     "ext4", // ext2, ext3 and ext4 share it
	0x58465342: "xfs",
	0x9123683e: "btrfs",
	0x01021994: "tmpfs",
	0x2fc12fc1: "zfs",
	0x794c7630: "overlayfs",
	0xf2f52010: "f2fs",
	0x6969:     "nfs",
	0xff534d42: "cifs",
	0x65735546: "fuse",
	0x858458f6: "ramfs",
	0x5346544e: "ntfs",
	0x4d44:     "vfat",
	0xca451a4e: "bcachefs",
	0x01021997: "9p",
}

// fsTypeName is the name of a statfs type, or its magic number in hex.
func fsTypeName(t int64) string {
	if n, ok := fsTypes[t]; ok {
		return n
	}
	return "0x" + strconv.FormatInt(t, 16)
}
