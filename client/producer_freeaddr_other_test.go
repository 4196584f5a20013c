//go:build !linux

package client_test

import (
	"net"
	"testing"
)

// prodFreeAddr returns a loopback address that was free a moment ago, so that a broker can be
// restarted on the same address. Elsewhere than on Linux (producer_freeaddr_linux_test.go) the
// port is not reserved: BSD's SO_REUSEADDR does not let a listener bind beside the reservation,
// so another process may take the port while the broker is down.
func prodFreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
