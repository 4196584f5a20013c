package chaos

import "syscall"

// childAttr kills a broker when the harness dies, even by SIGKILL, which leaves it no chance
// to stop its children (Linux sends the signal when the thread that started the child exits;
// Go ends a thread only when a goroutine locked to it exits, and the harness locks none), and
// puts it in a process group of its own, so that a terminal's Ctrl-C reaches the harness only:
// the harness then stops the brokers itself, in its own order.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
