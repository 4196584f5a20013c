package cluster

import (
	"context"
	"errors"
)

// rpcCodes maps this package's sentinels to the controller RPC's error codes, in one table, both
// ways. The codes are part of the wire protocol: never renumber them. An error wrapping none of
// these travels as rpcCodeUnknown with its message.
var rpcCodes = []struct {
	code int
	err  error
}{
	{1, ErrNotLeader},
	{2, ErrTopicExists},
	{3, ErrUnknownTopic},
	{4, ErrUnknownPartition},
	{5, ErrInvalidTopic},
	{6, ErrInvalidPartitions},
	{7, ErrInvalidReplicationFactor},
	{8, ErrInvalidReplicaAssignment},
	{9, ErrInvalidConfig},
	{10, ErrInvalidBroker},
	{11, ErrIneligibleReplica},
	{12, ErrStaleLeaderEpoch},
	{13, ErrUnknownCommand},
	{14, ErrClosed},
	{15, ErrDuplicateBroker},
	{16, ErrStaleBrokerEpoch},
	{17, context.DeadlineExceeded},
	{18, context.Canceled},
	{19, ErrInvalidUpdateVersion},
	{20, ErrUnknownBroker},
	{21, ErrNotPartitionLeader},
	{22, ErrInvalidClusterID},
	{23, ErrProducerIDsExhausted},
	// Before its parent ErrInvalidReassignment: errorCode takes the first match.
	{25, ErrNoReassignmentInProgress},
	{24, ErrInvalidReassignment},
	{26, ErrElectionNotNeeded},
	{27, ErrPreferredLeaderNotAvailable},
	{28, ErrEligibleLeadersNotAvailable},
}

const (
	rpcCodeNone    = 0
	rpcCodeUnknown = -1
)

// errorCode is err's code: rpcCodeNone for nil, the first sentinel it wraps, else rpcCodeUnknown.
func errorCode(err error) int {
	if err == nil {
		return rpcCodeNone
	}
	for _, c := range rpcCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return rpcCodeUnknown
}

// remoteError is an error the active controller answered: the message as it wrote it (already
// naming the value at fault), unwrapping to the sentinel its code names.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// codeError rebuilds the error a response carries.
func codeError(code int, msg string) error {
	if code == rpcCodeNone {
		return nil
	}
	for _, c := range rpcCodes {
		if c.code == code {
			return &remoteError{msg: msg, sentinel: c.err}
		}
	}
	return errors.New(msg)
}
