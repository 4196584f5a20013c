// Package cluster is Sluice's controller: the cluster metadata (brokers,
// topics, partition assignment, leaders, leader epochs, ISRs, topic configs)
// as a deterministic state machine replicated by hashicorp/raft.
//
// # What it owns
//
//   - The state machine (state.go, commands.go, apply.go): pure functions
//     from (metadata, raft index, command) to (next metadata, result). No
//     goroutines, clock, randomness or I/O; tests drive it directly.
//   - The raft driver (controller.go, fsm.go): raft-boltdb as log and stable
//     store, a file snapshot store, the transport, and the Controller API the
//     broker calls.
//   - The quorum (quorum.go, mux.go): with controller.quorum.voters, one raft
//     group over hashicorp's NetworkTransport on the CONTROLLER listener, which
//     also carries the controller RPC (rpc.go); the dialer writes a tag byte
//     ('R' raft, 'C' controller RPC) first on every connection. A fresh voter
//     bootstraps the whole voters configuration (the same on every voter); raft
//     state whose voters differ is refused. Broker-only nodes are raft
//     non-voters, added by the active controller when they ask (join).
//   - Routing (forward.go): a write on a node that does not lead is forwarded to
//     the leader and retried against the re-resolved leader after NOT_LEADER, a
//     lost leadership or a dropped link, until its context ends.
//   - Broker liveness (liveness.go on the active controller, lifecycle.go on the
//     broker): registration with an incarnation, heartbeats (not raft entries)
//     on an injectable Clock, fencing after broker.session.timeout.ms,
//     unfencing once caught up, controlled shutdown.
//   - The topic config registry (topicconfig.go): Kafka's topic config keys,
//     types, defaults and validation, and their typed form.
//
// Without voters a node is today's single-voter quorum over an in-memory
// transport, bootstrapping itself on first start, so data directories made
// before the cluster work open unchanged.
//
// # Invariants
//
//   - Apply is deterministic: its outcome, including which commands are
//     rejected and with which sentinel error, depends only on the current
//     state and the log entry. Anything random (topic ids) is drawn by the
//     proposer and carried in the command. Validation rules (topic names,
//     the config registry) are therefore part of the replicated protocol.
//   - Published *Metadata is immutable; a change builds a new one sharing
//     unchanged topics (copy-on-write) and publishes it with one atomic
//     store, then wakes subscribers without blocking.
//   - Metadata.Version is the raft index of the last command that changed
//     the state. It only grows and survives restarts and snapshots.
//   - For every partition: Leader is NoLeader or a replica; ISR ⊆ Replicas;
//     Leader ∈ ISR when there is a leader; LeaderEpoch grows by one on every
//     leader change. Names starting with "__" are exactly the internal topics.
//
// # On disk (<data.dir>/meta)
//
//	raft.db                       bbolt: raft log entries and stable store
//	snapshots/<term>-<index>-<ms>/  raft file snapshots (meta.json, state.bin)
//
// A log entry (raft LogCommand data) is one type byte followed by the
// command as JSON:
//
//	+--------+-------------------------------------------+
//	| type:1 | JSON body (registerBrokerCmd, ...)        |
//	+--------+-------------------------------------------+
//	type: 1 RegisterBroker, 2 CreateTopic, 3 DeleteTopic,
//	      4 AlterTopicConfigs, 5 SetPartitionLeader;
//	      reserved: 6 AllocateProducerIDs, 7 AlterPartition (ISR), 8 fence broker
//
// JSON because the controller handles a few commands a second at most, so
// encoding cost is irrelevant, while a readable, self-describing log is easy
// to inspect and to extend with optional fields. The type byte outside the
// JSON lets Apply dispatch, and reject unknown types, without parsing.
// state.bin is snapshotFile as JSON: {"format":1,"version":N,"brokers":[..],
// "topics":[..]}, both lists sorted, so equal states encode to equal bytes.
//
// # Room for what comes next (documented, not built)
//
// Producer-id blocks: a counter "next producer id" in Metadata and command 6
// handing a broker the block [next, next+1000), so idempotent producers get
// unique ids without a raft round trip each. ISR changes: command 7 carries
// (topic, partition, leader epoch, partition epoch, new ISR) from the
// partition leader and is fenced by those epochs, as Kafka's AlterPartition.
//
// # Locks
//
// notifier.mu, liveness.mu (sessions), mux.mu (open RPC connections) and
// rpcClient.mu (idle connections): each held briefly, never across I/O, a
// raft call or a call out. Controller state is otherwise atomics and raft's
// own synchronization.
package cluster
