package faultproxy

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// socketOwner is the pid among pids whose descriptors hold the socket connected from peer to
// front, or 0. It reads /proc afresh each time: a cache would go stale when a broker restarts.
func socketOwner(front, peer netip.AddrPort, pids []int) int {
	ino := socketInode(peer, front)
	if ino == 0 {
		return 0
	}
	link := "socket:[" + strconv.FormatUint(ino, 10) + "]"
	for _, pid := range pids {
		if holdsLink(pid, link) {
			return pid
		}
	}
	return 0
}

// socketInode is the inode of the TCP socket from local to remote, or 0. A socket of an IPv6
// family connected to ::ffff:127.0.0.1 is in tcp6.
func socketInode(local, remote netip.AddrPort) uint64 {
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		table, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		if ino := findInode(table, local, remote); ino != 0 {
			return ino
		}
	}
	return 0
}

// findInode finds the socket from local to remote in a /proc/net/tcp or tcp6 table:
//
//	sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
//	 0: 0100007F:1F90 0100007F:A3C2 01 00000000:00000000 00:00000000 00000000  1000        0 12345 ...
//
// Addresses are printed as 32-bit words in host order, ports in hex. An entry with inode 0
// (TIME_WAIT, or an orphan) belongs to no process and is skipped.
func findInode(table []byte, local, remote netip.AddrPort) uint64 {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	for line := range bytes.Lines(table) {
		f := strings.Fields(string(line))
		if len(f) < 10 {
			continue
		}
		l, ok1 := parseHexAddr(f[1])
		r, ok2 := parseHexAddr(f[2])
		if !ok1 || !ok2 || l != local || r != remote {
			continue
		}
		if ino, err := strconv.ParseUint(f[9], 10, 64); err == nil && ino != 0 {
			return ino
		}
	}
	return 0
}

// parseHexAddr parses an address of /proc/net/tcp (0100007F:1F90) or tcp6 (32 hex digits, then
// the port); a v4-mapped IPv6 address comes back as IPv4.
func parseHexAddr(s string) (netip.AddrPort, bool) {
	ip, port, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	pn, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	var a [16]byte
	n := len(ip) / 2 // bytes
	if n != 4 && n != 16 || len(ip)%8 != 0 {
		return netip.AddrPort{}, false
	}
	for i := 0; i < n/4; i++ {
		w, err := strconv.ParseUint(ip[8*i:8*i+8], 16, 32)
		if err != nil {
			return netip.AddrPort{}, false
		}
		binary.NativeEndian.PutUint32(a[4*i:], uint32(w))
	}
	var addr netip.Addr
	if n == 4 {
		addr = netip.AddrFrom4([4]byte(a[:4]))
	} else {
		addr = netip.AddrFrom16(a).Unmap()
	}
	return netip.AddrPortFrom(addr, uint16(pn)), true
}

// holdsLink reports whether one of pid's descriptors links to link (socket:[INODE]).
func holdsLink(pid int, link string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	f, err := os.Open(dir)
	if err != nil {
		return false // gone, or not ours to read
	}
	names, err := f.Readdirnames(-1)
	_ = f.Close()
	if err != nil {
		return false
	}
	for _, name := range names {
		if l, err := os.Readlink(dir + name); err == nil && l == link {
			return true
		}
	}
	return false
}
