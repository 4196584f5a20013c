//go:build !linux

package report

// detectPlatform leaves the memory, the kernel and the file system empty: they are read from
// Linux's files only.
func detectPlatform(*Machine) {}
