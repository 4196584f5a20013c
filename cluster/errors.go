package cluster

import "errors"

// Sentinel errors. Every error returned by this package wraps exactly one of
// these (plus context such as the topic name or config key), so the broker
// maps them to Kafka error codes in one place with errors.Is.
//
// The errors produced by the state machine are deterministic: the same
// command against the same state yields the same sentinel on every node.
// They travel from Apply back to the proposer through the raft ApplyFuture
// response, never through the raft log itself.
var (
	// ErrTopicExists: a topic with that name already exists (TOPIC_ALREADY_EXISTS).
	ErrTopicExists = errors.New("cluster: topic already exists")
	// ErrUnknownTopic: no topic with that name (or id) (UNKNOWN_TOPIC_OR_PARTITION).
	ErrUnknownTopic = errors.New("cluster: unknown topic")
	// ErrUnknownPartition: the topic exists but not that partition
	// (UNKNOWN_TOPIC_OR_PARTITION).
	ErrUnknownPartition = errors.New("cluster: unknown partition")
	// ErrInvalidTopic: the name breaks Kafka's rules, collides with an
	// existing name once '.' and '_' are treated as equal, or is reserved
	// for internal topics (INVALID_TOPIC_EXCEPTION).
	ErrInvalidTopic = errors.New("cluster: invalid topic")
	// ErrInvalidPartitions: partition count out of range (INVALID_PARTITIONS).
	ErrInvalidPartitions = errors.New("cluster: invalid number of partitions")
	// ErrInvalidReplicationFactor: replication factor < 1 or larger than the
	// number of live brokers (INVALID_REPLICATION_FACTOR).
	ErrInvalidReplicationFactor = errors.New("cluster: invalid replication factor")
	// ErrInvalidReplicaAssignment: an explicit assignment is ragged, repeats a
	// broker, names an unknown broker, or has a partition whose every replica
	// is fenced or shutting down (INVALID_REPLICA_ASSIGNMENT).
	ErrInvalidReplicaAssignment = errors.New("cluster: invalid replica assignment")
	// ErrInvalidConfig: unknown topic config key, unparsable or out-of-range
	// value, or a value Sluice does not support yet (INVALID_CONFIG).
	ErrInvalidConfig = errors.New("cluster: invalid config")
	// ErrInvalidBroker: a broker registration with a bad id or endpoint
	// (INVALID_REQUEST).
	ErrInvalidBroker = errors.New("cluster: invalid broker registration")
	// ErrIneligibleReplica: the proposed leader is not a replica of the
	// partition, or is outside the ISR while unclean election is disabled;
	// or a proposed ISR lacks the leader, holds a non-replica or one replica
	// twice, or grows by a fenced or shutting-down broker (INELIGIBLE_REPLICA).
	ErrIneligibleReplica = errors.New("cluster: ineligible replica")
	// ErrStaleLeaderEpoch: a leader change was computed from an older leader
	// epoch than the current one (FENCED_LEADER_EPOCH).
	ErrStaleLeaderEpoch = errors.New("cluster: stale leader epoch")
	// ErrStaleBrokerEpoch: a command on a broker's behalf names a broker
	// epoch that is not its current one: it comes from a previous run of the
	// broker, or was computed before the broker re-registered
	// (STALE_BROKER_EPOCH).
	ErrStaleBrokerEpoch = errors.New("cluster: stale broker epoch")
	// ErrInvalidUpdateVersion: an AlterPartition was computed from a
	// partition epoch that is not the current one (INVALID_UPDATE_VERSION).
	ErrInvalidUpdateVersion = errors.New("cluster: stale partition epoch")
	// ErrUnknownBroker: no broker with that id is registered
	// (BROKER_ID_NOT_REGISTERED).
	ErrUnknownBroker = errors.New("cluster: broker not registered")
	// ErrNotPartitionLeader: an AlterPartition from a broker that is not
	// the partition's leader (NOT_LEADER_OR_FOLLOWER).
	ErrNotPartitionLeader = errors.New("cluster: not the partition leader")
	// ErrDuplicateBroker: a registration of a broker id whose previous
	// incarnation still has a live session (DUPLICATE_BROKER_REGISTRATION).
	// The active controller decides it (Sessions.Live), not Apply.
	ErrDuplicateBroker = errors.New("cluster: broker id already registered by a live broker")
	// ErrInvalidClusterID: an empty or oversized cluster id (INVALID_REQUEST).
	ErrInvalidClusterID = errors.New("cluster: invalid cluster id")
	// ErrProducerIDsExhausted: the next producer-id block would pass the largest
	// int64 (UNKNOWN_SERVER_ERROR, as Kafka's).
	ErrProducerIDsExhausted = errors.New("cluster: producer ids exhausted")
	// ErrUnknownCommand: a raft log entry this version cannot decode.
	ErrUnknownCommand = errors.New("cluster: unknown command")
	// ErrNotLeader: this node is not the raft leader, or lost leadership
	// before the command committed (NOT_CONTROLLER). Retriable.
	ErrNotLeader = errors.New("cluster: not the controller leader")
	// errMayHaveCommitted marks the error of a write's last try when an earlier try was
	// ambiguous (the link dropped, or the leader lost its leadership, after the request may have
	// reached it): the command may have committed then, and this try's refusal may be the
	// consequence (DeleteTopic's UNKNOWN_TOPIC). Unexported: callers match the cause.
	errMayHaveCommitted = errors.New("cluster: an earlier try may have committed")
	// ErrClosed: the controller was closed.
	ErrClosed = errors.New("cluster: controller closed")

	// ErrInvalidReassignment: an AlterPartitionReassignments refused as a whole; the message
	// lists every problem (INVALID_REPLICA_ASSIGNMENT).
	ErrInvalidReassignment = errors.New("cluster: invalid reassignment")
	// ErrNoReassignmentInProgress: a cancel of a partition that is not being moved
	// (NO_REASSIGNMENT_IN_PROGRESS). It wraps ErrInvalidReassignment: the request naming it is
	// refused as a whole too.
	ErrNoReassignmentInProgress error = &childError{"cluster: no reassignment in progress", ErrInvalidReassignment}
	// ErrElectionNotNeeded: the partition already has the leader the election would give it
	// (ELECTION_NOT_NEEDED).
	ErrElectionNotNeeded = errors.New("cluster: election not needed")
	// ErrPreferredLeaderNotAvailable: the preferred replica is not in the ISR, or is fenced or
	// shutting down (PREFERRED_LEADER_NOT_AVAILABLE).
	ErrPreferredLeaderNotAvailable = errors.New("cluster: preferred leader not available")
	// ErrEligibleLeadersNotAvailable: an unclean election found no eligible replica
	// (ELIGIBLE_LEADERS_NOT_AVAILABLE).
	ErrEligibleLeadersNotAvailable = errors.New("cluster: eligible leaders not available")
)

// childError is a sentinel that is also a case of a broader one: errors.Is matches both.
type childError struct {
	msg    string
	parent error
}

func (e *childError) Error() string { return e.msg }
func (e *childError) Unwrap() error { return e.parent }
