package cluster

import "sync"

// notifier wakes subscribers after the metadata changes. A notification is
// a level, not an event: each subscriber's channel holds at most one pending
// signal, so a slow subscriber sees one wake-up for any number of changes and
// must re-read Metadata() and diff. Sending never blocks raft's FSM goroutine.
type notifier struct {
	mu struct {
		sync.Mutex
		subs   map[*subscription]struct{}
		closed bool
	}
}

type subscription struct {
	ch   chan struct{}
	once sync.Once
}

func newNotifier() *notifier {
	n := &notifier{}
	n.mu.subs = map[*subscription]struct{}{}
	return n
}

// subscribe registers a subscriber. Its channel is closed by cancel or when
// the notifier closes (the controller closed), whichever comes first.
func (n *notifier) subscribe() (<-chan struct{}, func()) {
	s := &subscription{ch: make(chan struct{}, 1)}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	n.mu.subs[s] = struct{}{}
	cancel := func() {
		n.mu.Lock()
		delete(n.mu.subs, s)
		n.mu.Unlock()
		s.once.Do(func() { close(s.ch) })
	}
	return s.ch, cancel
}

// notify signals every subscriber without blocking.
func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for s := range n.mu.subs {
		select {
		case s.ch <- struct{}{}:
		default: // a signal is already pending
		}
	}
}

// close closes every subscriber's channel; later subscribers get a closed one.
func (n *notifier) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.closed = true
	for s := range n.mu.subs {
		s.once.Do(func() { close(s.ch) })
	}
	clear(n.mu.subs)
}
