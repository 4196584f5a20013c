//go:build !linux

package server

// Without Linux's sendfile(2) semantics every file part is copied.
const sendfileSupported = false

func (w *writer) sendfileStep(fd uintptr) bool { return true }

func sendfileUnsupported(err error) bool { return true }
