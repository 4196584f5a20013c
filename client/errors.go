package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// brokerError is a broker's error code for one operation, said once: the client's own word
// for it where it has one (ErrUnknownTopic), else the code's description, then the code's
// name, then the broker's message if it sent one:
//
//	unknown topic or partition (UNKNOWN_TOPIC_OR_PARTITION): topic "x" does not exist
//
// errors.Is matches both the sentinel and the wire.ErrorCode.
type brokerError struct {
	sentinel error // nil if the client has no word of its own
	code     wire.ErrorCode
	msg      string
}

func (e *brokerError) Error() string {
	text := e.code.Message()
	if e.sentinel != nil {
		text = e.sentinel.Error()
	}
	text += " (" + e.code.Name() + ")"
	if e.msg != "" {
		text += ": " + e.msg
	}
	return text
}

func (e *brokerError) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.code}
	}
	return []error{e.sentinel, e.code}
}

// codeErr is the error for a broker's code and message (nil for NoError).
func codeErr(code wire.ErrorCode, msg *string) error {
	if code == wire.NoError {
		return nil
	}
	e := &brokerError{code: code}
	switch code {
	case wire.ErrUnknownTopicOrPartition:
		e.sentinel = ErrUnknownTopic
	case wire.ErrLeaderNotAvailable:
		e.sentinel = ErrNoLeader
	}
	if msg != nil {
		e.msg = *msg
	}
	return e
}

// NoAnswerError is a broker that took a request and did not answer it within
// request.timeout.ms (or before the caller's deadline). It matches context.DeadlineExceeded.
type NoAnswerError struct {
	Addr   string        // the broker's address
	Within time.Duration // the time it had
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("broker %s did not answer within %v", e.Addr, e.Within)
}

// Is makes errors.Is(err, context.DeadlineExceeded) hold.
func (e *NoAnswerError) Is(target error) bool { return target == context.DeadlineExceeded }

// callWithin is c.Call bounded by d (request.timeout.ms): a broker that does not answer in time
// fails with a NoAnswerError naming it, not with a bare context error.
func (c *Conn) callWithin(ctx context.Context, d time.Duration, req wire.Request, resp wire.Response) error {
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := c.Call(tctx, req, resp)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		within := d
		if ctx.Err() != nil {
			within = time.Since(start).Round(time.Millisecond) // the caller's deadline came first
		}
		return &NoAnswerError{Addr: c.addr, Within: within}
	}
	return err
}
