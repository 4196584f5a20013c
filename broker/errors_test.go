package broker

import (
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/producerstate"
)

// The cluster's errors reach clients as Kafka's codes, wrapped or not, and the ones a client
// retries after a metadata refresh are retriable.
func TestErrorCodeClusterErrors(t *testing.T) {
	for _, tc := range []struct {
		err       error
		want      wire.ErrorCode
		retriable bool
	}{
		{cluster.ErrNotLeader, wire.ErrNotController, true},
		{fmt.Errorf("create topic: %w", cluster.ErrNotLeader), wire.ErrNotController, true},
		{cluster.ErrInvalidReplicationFactor, wire.ErrInvalidReplicationFactor, false},
		{cluster.ErrInvalidReplicaAssignment, wire.ErrInvalidReplicaAssignment, false},
		{ErrNotLeaderOrFollower, wire.ErrNotLeaderOrFollower, true},
		{fmt.Errorf("%w: t-0 is led by broker 2", ErrNotLeaderOrFollower), wire.ErrNotLeaderOrFollower, true},
		{ErrLeaderNotAvailable, wire.ErrLeaderNotAvailable, true},
		{ErrFencedLeaderEpoch, wire.ErrFencedLeaderEpoch, true},
		{ErrUnknownLeaderEpoch, wire.ErrUnknownLeaderEpoch, true},
		{ErrNotCoordinator, wire.ErrNotCoordinator, true},
		{ErrCoordinatorNotAvailable, wire.ErrCoordinatorNotAvailable, true},
		// A coordinator refusal says why in its text, not by wrapping the partition's refusal:
		// the partition's code must not win.
		{fmt.Errorf("%w: group %q (%v)", ErrNotCoordinator, "g", ErrNotLeaderOrFollower), wire.ErrNotCoordinator, true},
		// InitProducerId's refusals: no block from the controller is retriable.
		{ErrProducerIDsUnavailable, wire.ErrCoordinatorNotAvailable, true},
		{fmt.Errorf("%w: %v", ErrProducerIDsUnavailable, cluster.ErrStaleBrokerEpoch), wire.ErrCoordinatorNotAvailable, true},
		{ErrTransactionsUnsupported, wire.ErrInvalidRequest, false},
		{cluster.ErrProducerIDsExhausted, wire.ErrUnknownServerError, false},
		// The producer-state window's refusals, as Kafka's codes.
		{producerstate.ErrOutOfOrderSequence, wire.ErrOutOfOrderSequenceNumber, false},
		{fmt.Errorf("t-0: %w", producerstate.ErrOutOfOrderSequence), wire.ErrOutOfOrderSequenceNumber, false},
		{producerstate.ErrDuplicateSequence, wire.ErrDuplicateSequenceNumber, false},
		{producerstate.ErrInvalidProducerEpoch, wire.ErrInvalidProducerEpoch, false},
		{producerstate.ErrUnknownProducerID, wire.ErrUnknownProducerID, false},
		{producerstate.ErrInvalidRecord, wire.ErrInvalidRecord, false},
	} {
		got := errorCode(tc.err)
		if got != tc.want {
			t.Errorf("errorCode(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if got.Retriable() != tc.retriable {
			t.Errorf("%v: retriable %v, want %v", got, got.Retriable(), tc.retriable)
		}
	}
}
