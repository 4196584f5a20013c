package broker

// replicaFetchers are the replica fetchers of the partitions this broker follows: one per
// (leader broker, fetcher index), each one connection with one long-polling fetch for all its
// partitions.
//
// Contract stub (issue #23): stream D2 writes it. The leader side (stream D1) calls follow when
// a partition's replica becomes a follower of a live leader (after rep.BecomeFollower), and
// unfollow when it stops following (leader, offline, deleted, closed); both are cheap and
// never block on the network. A nil *replicaFetchers does nothing.
type replicaFetchers struct{}

// follow starts (or moves) fetching p from its leader, as p.rep.NextFetch says.
func (rf *replicaFetchers) follow(p *partition) {}

// unfollow stops fetching p; a fetch in flight for it is dropped when it returns.
func (rf *replicaFetchers) unfollow(p *partition) {}

// close stops every fetcher and waits for them.
func (rf *replicaFetchers) close() {}
