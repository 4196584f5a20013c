//go:build !unix

package main

import "log/slog"

// dumpStacksOnSIGUSR1 does nothing where there is no SIGUSR1.
func dumpStacksOnSIGUSR1(*slog.Logger) (stop func()) { return func() {} }
