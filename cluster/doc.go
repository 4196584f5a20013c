// Package cluster is Sluice's controller: the cluster metadata (brokers,
// topics, partition assignment, leaders, leader epochs, ISRs, topic configs)
// as a deterministic state machine replicated by hashicorp/raft.
//
// # What it owns
//
//   - The state machine (state.go, commands.go, apply.go, brokerstate.go,
//     alterpartition.go, clusterid.go, placement.go, election.go, reassign.go,
//     electleaders.go, createpartitions.go, brokerconfig.go): pure functions
//     from (metadata, raft index, command) to (next metadata, result). No
//     goroutines, clock, randomness or I/O; tests drive it directly.
//   - The raft driver (controller.go, fsm.go, ops.go): raft-boltdb as log
//     and stable store, a file snapshot store, the transport, and the
//     Controller API the broker calls.
//   - Sessions (sessions.go): the active controller's heartbeat bookkeeping,
//     pure, on a clock the caller passes in.
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
//     types, defaults and validation, and their typed form. Dynamic broker
//     configs (brokerconfig.go): the replication throttle rates, cluster-wide
//     and per broker, in the metadata.
//   - Moving replicas (reassign.go): partition reassignments kept in the
//     partition metadata (adding and removing replicas), so a move survives a
//     controller failover; preferred and unclean elections on request
//     (electleaders.go); and the auto leader balance (leaderbalance.go), a
//     loop on the active controller on the injectable Clock.
//
// Without voters a node is today's single-voter quorum over an in-memory
// transport, bootstrapping itself on first start, so data directories made
// before the cluster work open unchanged.
//
// # Invariants
//
//   - Apply is deterministic: its outcome, including which commands are
//     rejected and with which sentinel error, depends only on the current
//     state and the log entry. Anything random (topic ids, the start and
//     shift of replica placement) is drawn by the proposer and carried in
//     the command. Validation rules (topic names, the config registry, a
//     topic's unclean.leader.election.enable over Kafka's default, never a
//     node's own broker default) are therefore part of the replicated
//     protocol.
//   - Published *Metadata is immutable; a change builds a new one sharing
//     unchanged topics (copy-on-write) and publishes it with one atomic
//     store, then wakes subscribers without blocking.
//   - Metadata.Version is the raft index of the last command that changed
//     the state. It only grows and survives restarts and snapshots.
//   - For every partition: Leader is NoLeader or a replica; ISR ⊆ Replicas;
//     Leader ∈ ISR when there is a leader; LeaderEpoch grows by one on every
//     leader change, PartitionEpoch by one on every leader, ISR or replica
//     change (at most one each per command). Names starting with "__" are
//     exactly the internal topics. A topic's partitions are only ever added,
//     and may differ in width (a move changes one partition's).
//   - A partition being moved has Replicas = target ++ removing, AddingReplicas
//     ⊆ target, and a non-empty target; its replicas change only when the move
//     completes (to the target: in the command that makes the ISR hold the
//     whole target, unless no target replica could lead yet) or is cancelled
//     (to Replicas − AddingReplicas).
//   - A broker's epoch is the raft index of its last registration. A fenced
//     broker leads no partition and is in an ISR only as its last member
//     (kept so that it can be elected cleanly when it returns); a
//     shutting-down broker leads only partitions no other alive ISR member
//     can take; neither is elected or placed. Leaders are elected by
//     ElectLeader: the first eligible ISR member in assignment order, or,
//     where the topic sets unclean.leader.election.enable, the first
//     eligible replica (logged at Warn).
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
//	      4 AlterTopicConfigs, 5 SetPartitionLeader,
//	      6 AllocateProducerIDs (a block of producer ids for a broker),
//	      7 AlterPartition (ISR change from the partition leader),
//	      8 FenceBroker, 9 UnfenceBroker, 10 ControlledShutdown,
//	      11 InitCluster (cluster id),
//	      12 AlterPartitionReassignments, 13 ElectLeaders,
//	      14 CreatePartitions, 15 AlterBrokerConfigs
//
// JSON because the controller handles a few commands a second at most, so
// encoding cost is irrelevant, while a readable, self-describing log is easy
// to inspect and to extend with optional fields. The type byte outside the
// JSON lets Apply dispatch, and reject unknown types, without parsing.
// state.bin is snapshotFile as JSON: {"format":1,"version":N,
// "cluster_id":"..","next_producer_id":N,"brokers":[..],"topics":[..],
// "broker_configs":{"":{..},"N":{..}}}, lists sorted (and JSON writes map keys
// sorted), so equal states encode to equal bytes. Fields added later are
// optional: a log entry or snapshot without them (a registration without an
// incarnation, a broker without fenced, a partition without partition_epoch
// or adding/removing replicas, a create without a placement seed, a state
// without next_producer_id or broker_configs) reads and applies as it did
// when written, with every broker alive, no move in progress, no throttle and
// no producer-id block given.
//
// # Producer-id blocks
//
// A counter "next producer id" in Metadata and command 6 handing a broker the
// block [next, next+1000) (producerids.go), so idempotent producers get unique
// ids without a raft round trip each.
//
// # Locks
//
// notifier.mu, liveness.mu (sessions), mux.mu (open RPC connections) and
// rpcClient.mu (idle connections): each held briefly, never across I/O, a
// raft call or a call out. Controller state is otherwise atomics and raft's
// own synchronization.
package cluster
