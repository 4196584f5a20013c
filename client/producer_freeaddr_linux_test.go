package client_test

import (
	"fmt"
	"syscall"
	"testing"
)

// prodFreeAddr returns a loopback address for a broker that the test stops and starts again on
// the same address, and keeps its port reserved until the test ends. Taking a port that was free
// a moment ago (listen on port 0, close, listen again) leaves it to anyone in between: another
// test binary's listener or outgoing connection can take it while the broker is down, and the
// restart then fails with "address already in use". The reservation is a socket bound to the
// port with SO_REUSEADDR and never listening: Linux lets a listener that also sets SO_REUSEADDR
// (Go's do) bind the port beside it, while other sockets' automatic port choice (listen on port
// 0, connect) passes over it and a plain bind is refused.
func prodFreeAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
