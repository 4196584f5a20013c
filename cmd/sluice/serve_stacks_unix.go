//go:build unix

package main

import (
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// dumpStacksOnSIGUSR1 writes every goroutine's stack to stderr (the broker's log) each time
// the process gets SIGUSR1, and goes on serving: how a broker that has stopped making
// progress without crashing shows where it waits (sluice chaos sends it when the cluster is
// stuck). The returned stop ends the goroutine.
func dumpStacksOnSIGUSR1(log *slog.Logger) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-ch:
				log.Warn("SIGUSR1: every goroutine's stack follows")
				_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
		<-finished
	}
}
