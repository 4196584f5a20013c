// Package broker is one Sluice broker process: it hosts the partitions the cluster metadata
// assigns to it, answers the protocol's requests (one handler file per request family, each
// headed by a "Behavior:" comment), and owns the broker-level configuration.
//
// Request flow: net/server calls Serve in request order, one request at a time per connection,
// on the connection's reader goroutine (or, for a request of 64 KiB or more, on its overlap
// goroutine while the reader reads the next). Handlers never block either on a wait: produce
// appends inline (one write per partition) and, for acks=all, parks the response in the
// partition's replica, completed when the high watermark passes the batch (replica.go); a fetch that cannot be answered yet parks in a goroutine woken by
// the partitions' appends; requests that wait on raft (topic administration) run off the
// connection's goroutines. A producer on the broker's host may hand its Produce bodies over in a
// shared-memory region attached to its unix-socket connection (shared.go): the connection's
// reader loads each body from the region (BodyLength, LoadBody) before Serve sees it.
//
// Partitions: the reconciler applies every committed metadata change (open the logs of newly
// assigned partitions, delete the data of deleted topics, apply altered configs); partition
// directories carry partition.metadata with the topic id, so data of a deleted and re-created
// topic is never mistaken for the new one. Logs open partitionOpenWorkers at a time. At
// start-up only the offsets topic's open before the listeners serve; the others open after, so
// that metadata is answered at once, and a request to a partition still opening gets
// NOT_LEADER_OR_FOLLOWER (retriable) until it is open (PartitionsOpen says when all are). The
// logs share one segment.FileCache (log.max.open.files) for their sealed segments' files.
//
// Leadership (leadership.go): a broker hosts a log for every partition it is a replica of, but
// only the leader the metadata names takes produce, fetch and ListOffsets, and coordinates the
// groups of the __consumer_offsets partitions it leads; the others are refused with the leader
// named (KIP-951). The leader and its epoch are one atomic word per partition, swapped by the
// reconciler; losing a leadership releases the partition's parked fetches and acks=all waits.
//
// Disk space (diskspace.go): a monitor reads the data directory's free space (statfs) every
// second and when space is freed, and puts the broker in Redpanda's ok, alert or degraded
// state; degraded refuses clients' produce with a retriable KAFKA_STORAGE_ERROR and deletes the
// ballast file (made at start, made again when space returns) so that raft and the logs'
// recovery points still have room, while fetch, metadata, topic deletion and retention go on.
// Logs reserve disk ahead (log.preallocate.bytes) only as far as the monitor grants.
//
// Scrub (scrub.go): one goroutine re-reads the sealed segments of every hosted partition at
// log.scrub.bytes.per.sec in all and checks every batch's CRC again; a batch found bad is
// logged and never served (CORRUPT_MESSAGE), and the replica shows as corrupt in Metadata v1.
//
// Invariants: no lock is held across disk or socket I/O in a handler (a slow consumer never
// blocks a producer); an acknowledged acks=all write on a write.caching=false topic has been
// fsynced; every error that reaches a client goes through errorCode, the one mapping from
// errors to protocol codes.
//
// Stopped logs: a partition log stops only on an I/O error of its data (segment/resource.go);
// the log supervisor (heal.go) then reopens it through recovery, with a backoff, and swaps it
// into the partition; produce and fetch get a retriable KAFKA_STORAGE_ERROR meanwhile.
//
// Replication (replica.go, issue #23): every hosted partition has a replication.Replica, the
// pure state machine of its ISR, high watermark, acks=all waits and leader epochs, changed only
// under partition.repMu; what it asks for (Ready) is acted on by applyReady before repMu is let
// go. The high watermark and whether acks=all is accepted are published to atomics, so the
// request path reads each in one load.
//
// Lock order: reconcileMu, then mu (the partition map) or partition.repMu; under repMu,
// partition.waitMu (waking fetches) and an acks=all request's mu (answering it) are leaves.
package broker
