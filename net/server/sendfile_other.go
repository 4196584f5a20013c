//go:build !linux

package server

// Without Linux's sendfile(2) semantics every file part is copied.
const sendfileSupported = false

// Without a non-blocking writev every response goes through the writer
// goroutine.
const directWriteSupported = false

type iovecs struct{}

func (w *writer) sendfileStep(fd uintptr) bool { return true }

func (w *writer) writevStep(fd uintptr) bool { return true }

func sendfileUnsupported(err error) bool { return true }
