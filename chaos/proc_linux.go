package chaos

import "syscall"

// childAttr kills a broker when the harness dies, even by SIGKILL, which leaves it no chance
// to stop its children (Linux sends the signal when the thread that started the child exits;
// Go ends a thread only when a goroutine locked to it exits, and the harness locks none).
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
