package broker

import (
	"context"
	"errors"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/producerstate"
	"github.com/sluicemq/sluice/segment"
)

// Broker-level sentinels.
var (
	ErrUnknownPartition = errors.New("broker: unknown topic or partition")
	ErrMessageTooLarge  = errors.New("broker: batch larger than max.message.bytes")
	// ErrInvalidTimestamp refuses a batch whose timestamps are further from the broker's clock
	// than message.timestamp.before.max.ms or message.timestamp.after.max.ms allow.
	ErrInvalidTimestamp = errors.New("broker: record timestamp outside the topic's accepted range")
	ErrInvalidAcks      = errors.New("broker: acks must be 0, 1 or -1")
	ErrClosed           = errors.New("broker: closed")
	// ErrOpenFileLimit refuses a topic whose partitions would need more open files than the
	// process may have: the broker would fail to open them, then to start again.
	ErrOpenFileLimit = errors.New("broker: not enough open files allowed for the partitions")
	// ErrDiskFull refuses a client's produce while the data directory's filesystem has less
	// free space than storage.space.min.free.bytes (diskspace.go). Retriable: produce resumes
	// by itself once space is freed.
	ErrDiskFull = errors.New("broker: disk full")
	errCorrupt  = segment.ErrCorrupt
	// ErrPartitionLoading answers a request to a partition this broker hosts whose log is still
	// opening (a restart serves metadata before every log is open).
	ErrPartitionLoading = errors.New("broker: partition is still opening")
	// ErrPartitionOffline answers a request to a partition whose log failed to open; the next
	// metadata change tries again.
	ErrPartitionOffline = errors.New("broker: partition's log could not be opened")
	// ErrNotLeaderOrFollower refuses a produce or fetch for a partition another broker leads,
	// or that this broker does not host (leadership.go). Retriable: the answer names the leader.
	ErrNotLeaderOrFollower = errors.New("broker: not the partition's leader")
	// ErrLeaderNotAvailable refuses a request for a partition that has no leader (none of its
	// in-sync replicas is alive). Retriable: the controller elects one when a replica returns.
	ErrLeaderNotAvailable = errors.New("broker: the partition has no leader")
	// ErrFencedLeaderEpoch refuses a fetch whose CurrentLeaderEpoch is older than the
	// partition's: the client's metadata is stale.
	ErrFencedLeaderEpoch = errors.New("broker: the request's leader epoch is older than the partition's")
	// ErrUnknownLeaderEpoch refuses a fetch whose CurrentLeaderEpoch is newer than the
	// partition's: this broker has not applied the leader change yet.
	ErrUnknownLeaderEpoch = errors.New("broker: the request's leader epoch is newer than the partition's")
	// ErrNotEnoughReplicasAfterAppend answers an acks=all produce whose batch was appended but
	// whose partition's ISR shrank below min.insync.replicas before the high watermark passed
	// it (NOT_ENOUGH_REPLICAS_AFTER_APPEND, retriable: the producer sends again).
	ErrNotEnoughReplicasAfterAppend = errors.New("broker: the in-sync replicas fell below min.insync.replicas after the append")
	// ErrRequestTimedOut answers an acks=all produce whose batch the high watermark had not
	// passed at the request's timeout.
	ErrRequestTimedOut = errors.New("broker: the write was not committed within the request's timeout")
	// ErrNotCoordinator refuses an offset commit or fetch for a group whose coordinator (the
	// leader of its __consumer_offsets partition) is another broker.
	ErrNotCoordinator = errors.New("broker: not the group's coordinator")
	// ErrCoordinatorNotAvailable refuses an offset commit or fetch for a group whose
	// __consumer_offsets partition has no leader, or whose log here is not open.
	ErrCoordinatorNotAvailable = errors.New("broker: the group's coordinator is not available")
	// ErrCoordinatorLoadInProgress refuses a group request while this broker, the new leader of
	// the group's __consumer_offsets partition, replays it (COORDINATOR_LOAD_IN_PROGRESS,
	// retriable).
	ErrCoordinatorLoadInProgress = errors.New("broker: the group's coordinator is loading its offsets partition")
	// ErrProducerIDsUnavailable refuses an InitProducerId while this broker's block of producer
	// ids is used up and the controller gives it no new one (no active controller, or this
	// broker's registration is being renewed): COORDINATOR_NOT_AVAILABLE, retriable, as Kafka.
	ErrProducerIDsUnavailable = errors.New("broker: no producer id available: the controller handed no block")
	// ErrTransactionsUnsupported refuses an InitProducerId with a transactional id:
	// transactions are not built (INVALID_REQUEST).
	ErrTransactionsUnsupported = errors.New("broker: transactions are not supported")
)

// appendInfo is what an append reports.
type appendInfo = segment.AppendInfo

// errorCode maps an error from any layer to the protocol's error code. This is the one place
// where that mapping lives. cluster.ErrNotLeader (the controller asked is not the active one, or
// lost the leadership before the change committed) is NOT_CONTROLLER, retriable: the client
// asks again, and the quorum forwards to the active controller where it can.
func errorCode(err error) wire.ErrorCode {
	switch {
	case err == nil:
		return wire.NoError
	case errors.Is(err, ErrUnknownPartition), errors.Is(err, cluster.ErrUnknownTopic), errors.Is(err, cluster.ErrUnknownPartition),
		errors.Is(err, segment.ErrDeleted):
		// segment.ErrDeleted: the request reached a partition whose log dropPartition was
		// deleting (its topic was deleted), as Kafka answers for a deleted topic. Checked before
		// the KAFKA_STORAGE_ERROR case below, whose ErrClosed it wraps (a log closed otherwise:
		// at shutdown).
		return wire.ErrUnknownTopicOrPartition
	case errors.Is(err, ErrPartitionLoading), errors.Is(err, ErrNotLeaderOrFollower):
		return wire.ErrNotLeaderOrFollower
	case errors.Is(err, ErrLeaderNotAvailable):
		return wire.ErrLeaderNotAvailable
	case errors.Is(err, ErrFencedLeaderEpoch):
		return wire.ErrFencedLeaderEpoch
	case errors.Is(err, ErrUnknownLeaderEpoch):
		return wire.ErrUnknownLeaderEpoch
	case errors.Is(err, ErrNotEnoughReplicasAfterAppend):
		return wire.ErrNotEnoughReplicasAfterAppend
	case errors.Is(err, ErrRequestTimedOut):
		return wire.ErrRequestTimedOut
	case errors.Is(err, errFetchSessionNotFound):
		return wire.ErrFetchSessionIDNotFound
	case errors.Is(err, errFetchSessionEpoch):
		return wire.ErrInvalidFetchSessionEpoch
	case errors.Is(err, ErrNotCoordinator):
		return wire.ErrNotCoordinator
	case errors.Is(err, ErrCoordinatorNotAvailable), errors.Is(err, ErrProducerIDsUnavailable):
		return wire.ErrCoordinatorNotAvailable
	case errors.Is(err, ErrTransactionsUnsupported):
		return wire.ErrInvalidRequest
	case errors.Is(err, producerstate.ErrOutOfOrderSequence):
		return wire.ErrOutOfOrderSequenceNumber
	case errors.Is(err, producerstate.ErrDuplicateSequence):
		return wire.ErrDuplicateSequenceNumber
	case errors.Is(err, producerstate.ErrInvalidProducerEpoch):
		return wire.ErrInvalidProducerEpoch
	case errors.Is(err, producerstate.ErrUnknownProducerID):
		return wire.ErrUnknownProducerID
	case errors.Is(err, producerstate.ErrInvalidRecord):
		return wire.ErrInvalidRecord
	case errors.Is(err, ErrPartitionOffline):
		return wire.ErrKafkaStorageError
	case errors.Is(err, ErrMessageTooLarge):
		return wire.ErrMessageTooLarge
	case errors.Is(err, ErrInvalidTimestamp):
		return wire.ErrInvalidTimestamp
	case errors.Is(err, ErrInvalidAcks):
		return wire.ErrInvalidRequiredAcks
	case errors.Is(err, segment.ErrOffsetOutOfRange):
		return wire.ErrOffsetOutOfRange
	case errors.Is(err, segment.ErrCorrupt), errors.Is(err, batch.ErrCRC), errors.Is(err, segment.ErrOffsetOrder):
		return wire.ErrCorruptMessage
	case errors.Is(err, segment.ErrCorruptData):
		// A fetch that reached a batch the scrub found bad on the disk: Kafka's answer to a
		// read of a corrupt record, and not retriable here (the bytes stay bad).
		return wire.ErrCorruptMessage
	case errors.Is(err, segment.ErrTooLarge):
		return wire.ErrRecordListTooLarge
	case errors.Is(err, segment.ErrFailed), errors.Is(err, segment.ErrClosed), errors.Is(err, segment.ErrUnavailable),
		errors.Is(err, ErrDiskFull), errors.Is(err, segment.ErrReopen):
		// Retriable: a stopped log is reopened by the supervisor (heal.go), an append the
		// log could not take for now (segment.ErrUnavailable) is taken once the resource
		// it lacked is back, a full disk (diskspace.go) takes produce again once space
		// is freed, and a read of a sealed segment whose closed file could not be opened
		// again (segment.ErrReopen: the file limit) succeeds once files are free.
		return wire.ErrKafkaStorageError
	case errors.Is(err, cluster.ErrTopicExists):
		return wire.ErrTopicAlreadyExists
	case errors.Is(err, cluster.ErrInvalidTopic):
		return wire.ErrInvalidTopicException
	case errors.Is(err, cluster.ErrInvalidPartitions):
		return wire.ErrInvalidPartitions
	case errors.Is(err, cluster.ErrNoReassignmentInProgress): // before the broader ErrInvalidReassignment
		return wire.ErrNoReassignmentInProgress
	case errors.Is(err, cluster.ErrInvalidReassignment):
		return wire.ErrInvalidReplicaAssignment
	case errors.Is(err, cluster.ErrElectionNotNeeded):
		return wire.ErrElectionNotNeeded
	case errors.Is(err, cluster.ErrPreferredLeaderNotAvailable):
		return wire.ErrPreferredLeaderNotAvailable
	case errors.Is(err, cluster.ErrEligibleLeadersNotAvailable):
		return wire.ErrEligibleLeadersNotAvailable
	case errors.Is(err, ErrOpenFileLimit):
		return wire.ErrPolicyViolation
	case errors.Is(err, cluster.ErrInvalidReplicationFactor):
		return wire.ErrInvalidReplicationFactor
	case errors.Is(err, cluster.ErrInvalidReplicaAssignment):
		return wire.ErrInvalidReplicaAssignment
	case errors.Is(err, cluster.ErrInvalidConfig):
		return wire.ErrInvalidConfig
	case errors.Is(err, cluster.ErrNotLeader):
		return wire.ErrNotController
	case errors.Is(err, cluster.ErrStaleBrokerEpoch):
		return wire.ErrStaleBrokerEpoch
	case errors.Is(err, cluster.ErrInvalidUpdateVersion):
		return wire.ErrInvalidUpdateVersion
	case errors.Is(err, cluster.ErrStaleLeaderEpoch):
		return wire.ErrFencedLeaderEpoch
	case errors.Is(err, cluster.ErrIneligibleReplica):
		return wire.ErrIneligibleReplica
	case errors.Is(err, cluster.ErrUnknownBroker):
		return wire.ErrBrokerIDNotRegistered
	case errors.Is(err, cluster.ErrNotPartitionLeader):
		return wire.ErrNotLeaderOrFollower
	case errors.Is(err, cluster.ErrDuplicateBroker):
		return wire.ErrDuplicateBrokerRegistration
	case errors.Is(err, cluster.ErrInvalidClusterID), errors.Is(err, cluster.ErrInvalidBroker):
		return wire.ErrInvalidRequest
	case errors.Is(err, context.DeadlineExceeded):
		return wire.ErrRequestTimedOut
	case errors.Is(err, ErrCoordinatorLoadInProgress):
		return wire.ErrCoordinatorLoadInProgress
	}
	// A protocol code wrapped as it is (the group coordinator's answers).
	var code wire.ErrorCode
	if errors.As(err, &code) {
		return code
	}
	return wire.ErrUnknownServerError
}
