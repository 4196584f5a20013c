package server

import (
	"runtime/debug"
	"time"
)

// Frame buffers above the largest pool class (maxBufClass) are left to the garbage collector
// when their request is done. After a normal request that is fine: the next large one reuses
// the heap they freed. But a connection that dies with a large frame half read (a peer that
// declared 100 MiB and went away) leaves memory that nothing may reuse soon, and on an idle
// broker no allocation starts the collection that would find it free: the process would keep
// it for minutes (the runtime forces a collection every 2). Such a death asks the scavenger
// goroutine to return free memory to the operating system now (debug.FreeOSMemory), at most
// once per scavengeInterval, so a peer that does it in a loop costs one collection per
// interval.
const scavengeInterval = 10 * time.Second

// noteAbandoned is called when a frame buffer of capacity n is dropped half read.
func (s *Server) noteAbandoned(n int) {
	if n <= 1<<maxBufClass {
		return // pooled: the pool reuses it, and the collector drops it unused
	}
	select {
	case s.scavenge <- struct{}{}:
		s.stats.memoryReturns.Add(1)
	default: // a return is already due
	}
}

// scavengeLoop is the scavenger goroutine, started by New and stopped by Close.
func (s *Server) scavengeLoop() {
	defer s.acceptWG.Done()
	for {
		select {
		case <-s.scavenge:
		case <-s.closing:
			return
		}
		debug.FreeOSMemory()
		if !s.sleep(scavengeInterval) {
			return
		}
	}
}
