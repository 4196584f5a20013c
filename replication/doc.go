// Package replication holds one partition replica's replication state as a pure state machine:
// as leader, each follower's progress, the in-sync replica set (ISR) it proposes, the high
// watermark and the acks=all produce waits it releases; as follower, where to fetch from, when to
// ask the leader for an epoch's end offset and where to truncate; on both, the leader-epoch cache
// (epoch → first offset, Kafka's leader-epoch-checkpoint).
//
// Shape (etcd raft's Step/Ready): a Replica changes only through method calls with explicit
// inputs, the time included, and reports what the driver must do in a Ready it takes with
// Replica.Ready. There are no goroutines, sockets, files or clocks here; the driver (broker/)
// owns the log, the network and the checkpoint files, and serializes every call on a Replica
// (a Replica is not safe for concurrent use).
//
// Invariants:
//   - The high watermark never moves backwards while a replica stays leader, and never exceeds
//     the smallest counted offset over the ISR the leader counts (the committed ISR plus the
//     members it has proposed to add; a member it has proposed to remove still counts until
//     the shrink is committed). The counted offset of a replica is its durable (fsynced) end
//     offset, or its log end with write caching.
//   - An ISR change takes effect only once the controller commits it (LeaderUpdate); at most
//     one proposal is outstanding.
//   - A produce wait is released exactly once: when the high watermark passes it, when the ISR
//     it needs shrinks below min.insync.replicas, when the replica stops leading, or when the
//     driver cancels it.
//   - A follower never truncates below what the leader's log holds for its epochs (KIP-101,
//     KIP-279): it truncates to the leader's end offset of the latest epoch both know, never to
//     its own high watermark.
//
// Files: replica.go (the API's types, the local log's bounds, Ready), leader.go (follower
// progress, ISR proposals, the high watermark), waits.go (acks=all waits), follower.go (the
// epoch query, truncation and fetch plan), epochs.go (the leader-epoch cache). The scenario
// scripts under testdata/scenarios show each rule step by step.
package replication
