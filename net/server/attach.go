package server

import (
	"io"
	"os"
	"syscall"
)

// maxPassedFiles bounds the descriptors a connection keeps that no handler has
// taken: a peer cannot make the broker hold more than this many open files
// through one connection. Descriptors beyond it are closed on arrival.
const maxPassedFiles = 4

// oobBytes is room for the ancillary data of one read: descriptors beyond it
// are closed by the kernel (MSG_CTRUNC).
var oobBytes = syscall.CmsgSpace(maxPassedFiles * 4)

// TakeFile returns the oldest descriptor the peer passed with SCM_RIGHTS over
// a unix socket that no handler has taken yet, or nil; the caller owns it. A
// descriptor arrives with the first byte it was sent with, so one sent in the
// same sendmsg as a request is here when Serve gets that request; it may also
// be here earlier, when the reader has read ahead, so only a request that
// comes with a descriptor should take one.
func (c *Conn) TakeFile() *os.File {
	c.attachMu.Lock()
	defer c.attachMu.Unlock()
	if len(c.files) == 0 {
		return nil
	}
	f := c.files[0]
	c.files = append(c.files[:0], c.files[1:]...)
	return f
}

// SetValue keeps v with the connection under key, closing the value it
// replaces, if any; a nil v just drops (and closes) that value. The
// connection closes v once it has served its last request: a handler may use
// it without other synchronization for as long as it is serving a request of
// the connection.
func (c *Conn) SetValue(key any, v io.Closer) {
	c.attachMu.Lock()
	if c.values == nil {
		c.values = map[any]io.Closer{}
	}
	old := c.values[key]
	if v == nil {
		delete(c.values, key)
	} else {
		c.values[key] = v
	}
	c.attachMu.Unlock()
	if old != nil && old != v {
		_ = old.Close()
	}
}

// Value returns what SetValue kept under key, or nil.
func (c *Conn) Value(key any) io.Closer {
	c.attachMu.Lock()
	defer c.attachMu.Unlock()
	return c.values[key]
}

// keepPassedFiles parses a read's ancillary data and keeps the descriptors it
// carried, up to maxPassedFiles; it closes the rest, and any that came with
// something other than SCM_RIGHTS.
func (c *Conn) keepPassedFiles(oob []byte) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for i := range msgs {
		fds, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, fd := range fds {
			c.attachMu.Lock()
			keep := len(c.files) < maxPassedFiles && !c.attachClosed
			if keep {
				c.files = append(c.files, os.NewFile(uintptr(fd), "passed"))
			}
			c.attachMu.Unlock()
			if !keep {
				_ = syscall.Close(fd)
			}
		}
	}
}

// closeAttached closes the descriptors no handler took and the values
// handlers kept. The reader calls it last, when no handler can run.
func (c *Conn) closeAttached() {
	c.attachMu.Lock()
	files, values := c.files, c.values
	c.files, c.values, c.attachClosed = nil, nil, true
	c.attachMu.Unlock()
	for _, f := range files {
		_ = f.Close()
	}
	for _, v := range values {
		_ = v.Close()
	}
}
