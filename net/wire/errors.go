package wire

import (
	"errors"
	"strconv"
)

// Decoding and framing errors. They describe bytes that cannot be parsed,
// so the only safe reaction is to close the connection (see DESIGN.md, "Bad
// input"); they never travel on the wire. They are returned unwrapped so the
// hot decode path does not allocate, and the caller adds its context.
var (
	// ErrShortBuffer: the input ends before a field, or a length or count
	// promises more bytes than remain.
	ErrShortBuffer = errors.New("wire: short buffer")
	// ErrInvalidLength: a negative length or count other than -1, or -1
	// where the field is not nullable.
	ErrInvalidLength = errors.New("wire: invalid length")
	// ErrTrailingBytes: bytes remain after the last field of a message.
	ErrTrailingBytes = errors.New("wire: trailing bytes after message")
	// ErrFrameTooLarge: a frame size above the configured maximum
	// (socket.request.max.bytes for requests), or an encoded frame whose
	// size does not fit the int32 size field.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrFrameTooSmall: a frame size smaller than its header.
	ErrFrameTooSmall = errors.New("wire: frame smaller than its header")
	// ErrUnknownAPI: an api key with no request type in this package.
	ErrUnknownAPI = errors.New("wire: unknown api key")
	// ErrRecordLens: the record lengths given to the segmented Fetch
	// encoder do not match the response's partitions.
	ErrRecordLens = errors.New("wire: record lengths do not match fetch response partitions")
)

// ErrorCode is a protocol error code, carried in responses. The numbers and
// names are Kafka's wherever the meaning is the same, so Kafka users and
// tools read them unchanged.
//
// An ErrorCode is an error, so a code can be returned and matched directly:
//
//	if errors.Is(err, wire.ErrNotLeaderOrFollower) { refresh metadata }
//
// NoError (0) is not a failure: convert a response field with Err, which
// gives nil for NoError, before returning it as an error.
type ErrorCode int16

// NoError is the code of success.
const NoError ErrorCode = 0

// The error codes Sluice uses, in the order of errorTable below. The
// constant names follow Kafka's (ErrX for X_NAME).
const (
	ErrUnknownServerError           ErrorCode = -1
	ErrOffsetOutOfRange             ErrorCode = 1
	ErrCorruptMessage               ErrorCode = 2
	ErrUnknownTopicOrPartition      ErrorCode = 3
	ErrInvalidFetchSize             ErrorCode = 4
	ErrLeaderNotAvailable           ErrorCode = 5
	ErrNotLeaderOrFollower          ErrorCode = 6
	ErrRequestTimedOut              ErrorCode = 7
	ErrBrokerNotAvailable           ErrorCode = 8
	ErrReplicaNotAvailable          ErrorCode = 9
	ErrMessageTooLarge              ErrorCode = 10
	ErrStaleControllerEpoch         ErrorCode = 11
	ErrOffsetMetadataTooLarge       ErrorCode = 12
	ErrNetworkException             ErrorCode = 13
	ErrCoordinatorLoadInProgress    ErrorCode = 14
	ErrCoordinatorNotAvailable      ErrorCode = 15
	ErrNotCoordinator               ErrorCode = 16
	ErrInvalidTopicException        ErrorCode = 17
	ErrRecordListTooLarge           ErrorCode = 18
	ErrNotEnoughReplicas            ErrorCode = 19
	ErrNotEnoughReplicasAfterAppend ErrorCode = 20
	ErrInvalidRequiredAcks          ErrorCode = 21
	ErrIllegalGeneration            ErrorCode = 22
	ErrInconsistentGroupProtocol    ErrorCode = 23
	ErrInvalidGroupID               ErrorCode = 24
	ErrUnknownMemberID              ErrorCode = 25
	ErrInvalidSessionTimeout        ErrorCode = 26
	ErrRebalanceInProgress          ErrorCode = 27
	ErrInvalidCommitOffsetSize      ErrorCode = 28
	ErrInvalidTimestamp             ErrorCode = 32
	ErrUnsupportedVersion           ErrorCode = 35
	ErrTopicAlreadyExists           ErrorCode = 36
	ErrInvalidPartitions            ErrorCode = 37
	ErrInvalidReplicationFactor     ErrorCode = 38
	ErrInvalidReplicaAssignment     ErrorCode = 39
	ErrInvalidConfig                ErrorCode = 40
	ErrNotController                ErrorCode = 41
	ErrInvalidRequest               ErrorCode = 42
	ErrPolicyViolation              ErrorCode = 44
	ErrOutOfOrderSequenceNumber     ErrorCode = 45
	ErrDuplicateSequenceNumber      ErrorCode = 46
	ErrInvalidProducerEpoch         ErrorCode = 47
	ErrInvalidProducerIDMapping     ErrorCode = 49
	ErrKafkaStorageError            ErrorCode = 56
	ErrUnknownProducerID            ErrorCode = 59
	ErrReassignmentInProgress       ErrorCode = 60
	ErrNonEmptyGroup                ErrorCode = 68
	ErrGroupIDNotFound              ErrorCode = 69
	ErrFetchSessionIDNotFound       ErrorCode = 70
	ErrInvalidFetchSessionEpoch     ErrorCode = 71
	ErrTopicDeletionDisabled        ErrorCode = 73
	ErrFencedLeaderEpoch            ErrorCode = 74
	ErrUnknownLeaderEpoch           ErrorCode = 75
	ErrUnsupportedCompressionType   ErrorCode = 76
	ErrStaleBrokerEpoch             ErrorCode = 77
	ErrOffsetNotAvailable           ErrorCode = 78
	ErrMemberIDRequired             ErrorCode = 79
	ErrPreferredLeaderNotAvailable  ErrorCode = 80
	ErrGroupMaxSizeReached          ErrorCode = 81
	ErrFencedInstanceID             ErrorCode = 82
	ErrEligibleLeadersNotAvailable  ErrorCode = 83
	ErrElectionNotNeeded            ErrorCode = 84
	ErrNoReassignmentInProgress     ErrorCode = 85
	ErrGroupSubscribedToTopic       ErrorCode = 86
	ErrInvalidRecord                ErrorCode = 87
	ErrUnstableOffsetCommit         ErrorCode = 88
	ErrThrottlingQuotaExceeded      ErrorCode = 89
	ErrProducerFenced               ErrorCode = 90
	ErrResourceNotFound             ErrorCode = 91
	ErrDuplicateResource            ErrorCode = 92
	ErrInvalidUpdateVersion         ErrorCode = 95
	ErrUnknownTopicID               ErrorCode = 100
	ErrDuplicateBrokerRegistration  ErrorCode = 101
	ErrBrokerIDNotRegistered        ErrorCode = 102
	ErrInconsistentTopicID          ErrorCode = 103
	ErrInconsistentClusterID        ErrorCode = 104
	ErrIneligibleReplica            ErrorCode = 107
	ErrNewLeaderElected             ErrorCode = 108
)

// errorInfo is one row of the error table. retriable follows Kafka's
// classification: true when the same request may succeed later without the
// client changing it (after a metadata refresh or a backoff).
type errorInfo struct {
	code      ErrorCode
	name      string
	retriable bool
	message   string
}

// errorTable is the one table of protocol errors; docs/protocol.md carries a
// copy that TestProtocolDocErrorTable keeps in step.
var errorTable = []errorInfo{
	{NoError, "NONE", false, "success"},
	{ErrUnknownServerError, "UNKNOWN_SERVER_ERROR", false, "the server failed in a way it has no code for; see its log"},
	{ErrOffsetOutOfRange, "OFFSET_OUT_OF_RANGE", false, "the offset is below the log start or above the log end of the partition"},
	{ErrCorruptMessage, "CORRUPT_MESSAGE", true, "a record batch failed its CRC, length or magic check"},
	{ErrUnknownTopicOrPartition, "UNKNOWN_TOPIC_OR_PARTITION", true, "this broker does not host the topic-partition"},
	{ErrInvalidFetchSize, "INVALID_FETCH_SIZE", false, "the fetch size is not valid"},
	{ErrLeaderNotAvailable, "LEADER_NOT_AVAILABLE", true, "the partition has no leader, usually because an election is under way"},
	{ErrNotLeaderOrFollower, "NOT_LEADER_OR_FOLLOWER", true, "this broker is not the partition's leader (or, for replica requests, not one of its replicas)"},
	{ErrRequestTimedOut, "REQUEST_TIMED_OUT", true, "the request did not complete within its timeout"},
	{ErrBrokerNotAvailable, "BROKER_NOT_AVAILABLE", false, "the broker is not available"},
	{ErrReplicaNotAvailable, "REPLICA_NOT_AVAILABLE", true, "the replica is not available for the partition"},
	{ErrMessageTooLarge, "MESSAGE_TOO_LARGE", false, "a record batch is larger than the topic's max.message.bytes"},
	{ErrStaleControllerEpoch, "STALE_CONTROLLER_EPOCH", false, "the request came from a controller that has been replaced"},
	{ErrOffsetMetadataTooLarge, "OFFSET_METADATA_TOO_LARGE", false, "the metadata string of a committed offset is too long"},
	{ErrNetworkException, "NETWORK_EXCEPTION", true, "the connection closed before the response arrived"},
	{ErrCoordinatorLoadInProgress, "COORDINATOR_LOAD_IN_PROGRESS", true, "the coordinator is still loading its state"},
	{ErrCoordinatorNotAvailable, "COORDINATOR_NOT_AVAILABLE", true, "the coordinator is not available"},
	{ErrNotCoordinator, "NOT_COORDINATOR", true, "this broker is not the coordinator for the group"},
	{ErrInvalidTopicException, "INVALID_TOPIC_EXCEPTION", false, "the topic name is not valid, or the operation is not allowed on this topic"},
	{ErrRecordListTooLarge, "RECORD_LIST_TOO_LARGE", false, "the records for a partition are larger than a segment can hold"},
	{ErrNotEnoughReplicas, "NOT_ENOUGH_REPLICAS", true, "the in-sync replicas are fewer than min.insync.replicas; nothing was appended"},
	{ErrNotEnoughReplicasAfterAppend, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true, "the batch was appended but the in-sync replicas fell below min.insync.replicas"},
	{ErrInvalidRequiredAcks, "INVALID_REQUIRED_ACKS", false, "acks must be 0, 1 or -1"},
	{ErrIllegalGeneration, "ILLEGAL_GENERATION", false, "the group generation is not the current one"},
	{ErrInconsistentGroupProtocol, "INCONSISTENT_GROUP_PROTOCOL", false, "the member's protocols do not match the group's"},
	{ErrInvalidGroupID, "INVALID_GROUP_ID", false, "the group id is not valid"},
	{ErrUnknownMemberID, "UNKNOWN_MEMBER_ID", false, "the coordinator does not know this member"},
	{ErrInvalidSessionTimeout, "INVALID_SESSION_TIMEOUT", false, "the session timeout is outside the broker's allowed range"},
	{ErrRebalanceInProgress, "REBALANCE_IN_PROGRESS", false, "the group is rebalancing; the member must rejoin"},
	{ErrInvalidCommitOffsetSize, "INVALID_COMMIT_OFFSET_SIZE", false, "the offset commit is too large"},
	{ErrInvalidTimestamp, "INVALID_TIMESTAMP", false, "a record timestamp is outside the accepted range"},
	{ErrUnsupportedVersion, "UNSUPPORTED_VERSION", false, "the broker does not support this version of the api"},
	{ErrTopicAlreadyExists, "TOPIC_ALREADY_EXISTS", false, "a topic with this name already exists"},
	{ErrInvalidPartitions, "INVALID_PARTITIONS", false, "the partition count is not valid"},
	{ErrInvalidReplicationFactor, "INVALID_REPLICATION_FACTOR", false, "the replication factor is below 1 or above the number of live brokers"},
	{ErrInvalidReplicaAssignment, "INVALID_REPLICA_ASSIGNMENT", false, "the explicit replica assignment is not valid"},
	{ErrInvalidConfig, "INVALID_CONFIG", false, "a configuration name or value is not valid"},
	{ErrNotController, "NOT_CONTROLLER", true, "this broker is not the active controller"},
	{ErrInvalidRequest, "INVALID_REQUEST", false, "the request is malformed or inconsistent; see the broker log"},
	{ErrPolicyViolation, "POLICY_VIOLATION", false, "the request breaks a configured policy"},
	{ErrOutOfOrderSequenceNumber, "OUT_OF_ORDER_SEQUENCE_NUMBER", false, "the producer sequence number skips ahead of the expected one"},
	{ErrDuplicateSequenceNumber, "DUPLICATE_SEQUENCE_NUMBER", false, "the producer sequence number was already appended"},
	{ErrInvalidProducerEpoch, "INVALID_PRODUCER_EPOCH", false, "the producer epoch is older than the current one"},
	{ErrInvalidProducerIDMapping, "INVALID_PRODUCER_ID_MAPPING", false, "the producer id is not the one assigned to this transactional id"},
	{ErrKafkaStorageError, "KAFKA_STORAGE_ERROR", true, "a disk error on the broker; the partition is offline on it"},
	{ErrUnknownProducerID, "UNKNOWN_PRODUCER_ID", false, "the broker has no state for this producer id"},
	{ErrReassignmentInProgress, "REASSIGNMENT_IN_PROGRESS", false, "a partition reassignment is in progress"},
	{ErrNonEmptyGroup, "NON_EMPTY_GROUP", false, "the group still has members"},
	{ErrGroupIDNotFound, "GROUP_ID_NOT_FOUND", false, "the group does not exist"},
	{ErrFetchSessionIDNotFound, "FETCH_SESSION_ID_NOT_FOUND", true, "the broker has no fetch session with the request's id (evicted, or the broker restarted)"},
	{ErrInvalidFetchSessionEpoch, "INVALID_FETCH_SESSION_EPOCH", true, "the request's fetch session epoch is not the one the session expects next"},
	{ErrTopicDeletionDisabled, "TOPIC_DELETION_DISABLED", false, "topic deletion is disabled on this cluster"},
	{ErrFencedLeaderEpoch, "FENCED_LEADER_EPOCH", true, "the request's leader epoch is older than the broker's"},
	{ErrUnknownLeaderEpoch, "UNKNOWN_LEADER_EPOCH", true, "the request's leader epoch is newer than the broker's"},
	{ErrUnsupportedCompressionType, "UNSUPPORTED_COMPRESSION_TYPE", false, "the compression codec is not supported"},
	{ErrStaleBrokerEpoch, "STALE_BROKER_EPOCH", false, "the broker epoch in the request is not current"},
	{ErrOffsetNotAvailable, "OFFSET_NOT_AVAILABLE", true, "the new leader's high watermark has not yet caught up, so the offset cannot be answered yet"},
	{ErrMemberIDRequired, "MEMBER_ID_REQUIRED", false, "the member must rejoin with the member id it was given"},
	{ErrPreferredLeaderNotAvailable, "PREFERRED_LEADER_NOT_AVAILABLE", true, "the preferred leader is not available"},
	{ErrGroupMaxSizeReached, "GROUP_MAX_SIZE_REACHED", false, "the group has reached its maximum size"},
	{ErrFencedInstanceID, "FENCED_INSTANCE_ID", false, "another member with the same group.instance.id has joined; this one is fenced"},
	{ErrEligibleLeadersNotAvailable, "ELIGIBLE_LEADERS_NOT_AVAILABLE", true, "no eligible replica can become leader"},
	{ErrElectionNotNeeded, "ELECTION_NOT_NEEDED", true, "the partition already has the requested leader"},
	{ErrNoReassignmentInProgress, "NO_REASSIGNMENT_IN_PROGRESS", false, "no partition reassignment is in progress"},
	{ErrGroupSubscribedToTopic, "GROUP_SUBSCRIBED_TO_TOPIC", false, "a member of the group is subscribed to the topic, so its offsets cannot be deleted"},
	{ErrInvalidRecord, "INVALID_RECORD", false, "a record failed the broker's validation"},
	{ErrUnstableOffsetCommit, "UNSTABLE_OFFSET_COMMIT", true, "pending offsets must be resolved first"},
	{ErrThrottlingQuotaExceeded, "THROTTLING_QUOTA_EXCEEDED", true, "a throttling quota was exceeded"},
	{ErrProducerFenced, "PRODUCER_FENCED", false, "a newer producer with the same transactional id fenced this one"},
	{ErrResourceNotFound, "RESOURCE_NOT_FOUND", false, "the request names a resource that does not exist"},
	{ErrDuplicateResource, "DUPLICATE_RESOURCE", false, "the request names the same resource twice"},
	{ErrUnknownTopicID, "UNKNOWN_TOPIC_ID", true, "this broker does not host a topic with this id"},
	{ErrInvalidUpdateVersion, "INVALID_UPDATE_VERSION", false, "the partition epoch in the request is not current"},
	{ErrDuplicateBrokerRegistration, "DUPLICATE_BROKER_REGISTRATION", false, "another live broker registered with this broker id"},
	{ErrBrokerIDNotRegistered, "BROKER_ID_NOT_REGISTERED", false, "the broker id is not registered with the controller"},
	{ErrInconsistentTopicID, "INCONSISTENT_TOPIC_ID", true, "the log's topic id differs from the request's"},
	{ErrInconsistentClusterID, "INCONSISTENT_CLUSTER_ID", false, "the cluster id differs from this cluster's"},
	{ErrIneligibleReplica, "INELIGIBLE_REPLICA", false, "the new ISR holds a replica that may not join it"},
	{ErrNewLeaderElected, "NEW_LEADER_ELECTED", false, "the ISR change was applied but the partition has a new leader"},
}

// errorIndex maps a code to its row in errorTable.
var errorIndex = func() map[ErrorCode]*errorInfo {
	m := make(map[ErrorCode]*errorInfo, len(errorTable))
	for i := range errorTable {
		m[errorTable[i].code] = &errorTable[i]
	}
	return m
}()

// Error returns "NAME: message". It carries no "wire:" prefix because the
// code usually comes from the remote side and Kafka users search for NAME.
func (c ErrorCode) Error() string {
	if e, ok := errorIndex[c]; ok {
		return e.name + ": " + e.message
	}
	return c.Name() + ": unknown error code"
}

// Name returns the Kafka-style name, e.g. "NOT_LEADER_OR_FOLLOWER", or
// "ERROR_CODE_<n>" for a code not in the table.
func (c ErrorCode) Name() string {
	if e, ok := errorIndex[c]; ok {
		return e.name
	}
	return "ERROR_CODE_" + strconv.Itoa(int(c))
}

// Message returns the one-line description of the code.
func (c ErrorCode) Message() string {
	if e, ok := errorIndex[c]; ok {
		return e.message
	}
	return "unknown error code"
}

// Retriable reports whether the same request may succeed if retried later
// (after a metadata refresh or backoff). Unknown codes are not retriable.
func (c ErrorCode) Retriable() bool {
	e, ok := errorIndex[c]
	return ok && e.retriable
}

// Known reports whether c is in the error table.
func (c ErrorCode) Known() bool {
	_, ok := errorIndex[c]
	return ok
}

// Err returns nil for NoError and c otherwise, for turning a response field
// into a Go error.
func (c ErrorCode) Err() error {
	if c == NoError {
		return nil
	}
	return c
}

// ErrorForCode returns nil for 0 and the ErrorCode otherwise, so that
// errors.Is(err, ErrNotLeaderOrFollower) works. A code not in the table is
// kept as it is (not folded into UNKNOWN_SERVER_ERROR) so logs show it.
func ErrorForCode(code int16) error { return ErrorCode(code).Err() }

// ErrorCodes returns every code in the table, NoError first, in table order.
func ErrorCodes() []ErrorCode {
	codes := make([]ErrorCode, len(errorTable))
	for i, e := range errorTable {
		codes[i] = e.code
	}
	return codes
}
