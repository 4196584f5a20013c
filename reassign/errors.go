package reassign

import (
	"errors"
	"fmt"
)

// ParseError is a file that is not the JSON its parser reads: where (1-based line and column,
// columns counting characters), the field it is about ("partitions[2].replicas[0]"; "" for
// malformed JSON), and what is wrong.
type ParseError struct {
	Line, Column int
	Field        string
	Msg          string
}

func (e *ParseError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("line %d, column %d: %s: %s", e.Line, e.Column, e.Field, e.Msg)
}

// Is makes every *ParseError match ErrMalformed.
func (e *ParseError) Is(target error) bool { return target == ErrMalformed }

var (
	// ErrMalformed is matched by every *ParseError.
	ErrMalformed = errors.New("reassign: malformed file")
	// ErrInvalidPlan wraps what Validate and Generate refuse in a plan or an assignment:
	// duplicate partitions, empty or duplicate replica lists, negative ids.
	ErrInvalidPlan = errors.New("reassign: invalid plan")
	// ErrBrokers wraps a broker list Generate cannot use: empty, a broker twice, or fewer
	// brokers than a partition has replicas.
	ErrBrokers = errors.New("reassign: unusable broker list")
)
