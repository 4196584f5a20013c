package faultproxy

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"
)

// childEnv makes the test binary a tiny node (childMain): it waits for a line on stdin, dials
// the address in the variable, and echoes until the connection ends.
const childEnv = "FAULTPROXY_TEST_CHILD_DIAL"

func TestMain(m *testing.M) {
	if addr := os.Getenv(childEnv); addr != "" {
		os.Exit(childMain(addr))
	}
	os.Exit(m.Run())
}

func childMain(addr string) int {
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 2
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 3
	}
	_, _ = io.Copy(c, c)
	return 0
}

// child is a started childMain, released by go.
type child struct {
	cmd  *exec.Cmd
	go_  io.WriteCloser
	done chan error
}

func startChild(t *testing.T, addr string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+addr)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &child{cmd: cmd, go_: in, done: make(chan error, 1)}
	go func() { ch.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // by its pid
		<-ch.done
	})
	return ch
}

func (c *child) release(t *testing.T) {
	t.Helper()
	if _, err := fmt.Fprintln(c.go_, "go"); err != nil {
		t.Fatal(err)
	}
}

// TestIdentifiesChildProcesses: a connection from a process registered by SetPID is its
// node's (found through /proc), one from an unregistered process is a client's, and the rules
// then follow: cutting the node closes its connection (the child's echo loop ends, so it
// exits) and leaves the client's carrying bytes.
func TestIdentifiesChildProcesses(t *testing.T) {
	p := New()
	t.Cleanup(func() { _ = p.Close() })
	tk := startTalker(t)
	front2 := front(t, p, 2, tk.addr())

	node := startChild(t, front2)
	p.SetPID(1, node.cmd.Process.Pid)
	node.release(t)
	waitFor(t, "the registered child's connection told as node 1's", func() bool { return p.LinkConns(1, 2) == 1 })

	stranger := startChild(t, front2)
	stranger.release(t)
	waitFor(t, "the unregistered child's connection told as a client's", func() bool { return p.LinkConns(Clients, 2) == 1 })

	for range 2 { // each child echoes the greeting back through the proxy
		select {
		case s := <-tk.got:
			if s != "hello" {
				t.Fatalf("echoed %q", s)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a child's echo never arrived")
		}
	}

	p.Cut(1, 2)
	select {
	case err := <-node.done:
		node.done <- err // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("the cut did not close node 1's connection")
	}
	if p.LinkConns(Clients, 2) != 1 {
		t.Fatal("cutting node 1 closed a client's connection")
	}
}

// TestIdentifiesOwnProcess: the proxy's own process may be a node (its accepted sockets are
// among its descriptors too: the lookup must pick the dialing one), and SetPID(node, 0)
// forgets it.
func TestIdentifiesOwnProcess(t *testing.T) {
	p := New()
	t.Cleanup(func() { _ = p.Close() })
	e := serve(t, echo)
	front2 := front(t, p, 2, e.addr())
	p.SetPID(3, os.Getpid())
	c, err := net.Dial("tcp", front2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !roundTrip(c, "me", 5*time.Second) || p.LinkConns(3, 2) != 1 {
		t.Fatalf("LinkConns(3, 2) = %d, want 1", p.LinkConns(3, 2))
	}
	p.SetPID(3, 0)
	c2, err := net.Dial("tcp", front2)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if !roundTrip(c2, "me", 5*time.Second) || p.LinkConns(Clients, 2) != 1 {
		t.Fatalf("LinkConns(Clients, 2) = %d after SetPID(3, 0), want 1", p.LinkConns(Clients, 2))
	}
}

// TestFindInode: /proc/net/tcp and tcp6 lines are matched on both addresses (a v4-mapped one
// as IPv4), and an entry without an inode (TIME_WAIT) is skipped.
func TestFindInode(t *testing.T) {
	// /proc prints each 32-bit word of an address in host order.
	word := func(b ...byte) string { return fmt.Sprintf("%08X", binary.NativeEndian.Uint32(b)) }
	lo := word(127, 0, 0, 1)
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: " + lo + ":1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 111 1 0 100 0 0 10 0\n" +
		"   1: " + lo + ":A3C2 " + lo + ":1F90 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0\n" +
		"   2: " + lo + ":A3C2 " + lo + ":1F90 01 00000000:00000000 00:00000000 00000000  1000        0 222 1 0 20 4 30 10 -1\n" +
		"   3: " + lo + ":1F90 " + lo + ":A3C2 01 00000000:00000000 00:00000000 00000000  1000        0 333 1 0 20 4 30 10 -1\n"
	peer := netip.MustParseAddrPort("127.0.0.1:41922") // 0xA3C2
	frontAP := netip.MustParseAddrPort("127.0.0.1:8080")
	if got := findInode([]byte(table), peer, frontAP); got != 222 {
		t.Fatalf("inode %d, want 222 (the dialing socket, not the accepted one or TIME_WAIT)", got)
	}
	if got := findInode([]byte(table), netip.MustParseAddrPort("[::ffff:127.0.0.1]:41922"), frontAP); got != 222 {
		t.Fatalf("v4-mapped: inode %d, want 222", got)
	}
	mapped := word(0, 0, 0, 0) + word(0, 0, 0, 0) + word(0, 0, 0xff, 0xff) + lo
	table6 := "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: " + mapped + ":A3C2 " + mapped + ":1F90 01 00000000:00000000 00:00000000 00000000  1000        0 444 1 0 20 4 30 10 -1\n"
	if got := findInode([]byte(table6), peer, frontAP); got != 444 {
		t.Fatalf("tcp6 v4-mapped: inode %d, want 444", got)
	}
	if got := findInode([]byte(table), frontAP, frontAP); got != 0 {
		t.Fatalf("no such socket, yet inode %d", got)
	}
}
