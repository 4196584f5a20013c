package wire

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorCodes(t *testing.T) {
	names := map[string]bool{}
	codes := map[ErrorCode]bool{}
	for _, e := range errorTable {
		if names[e.name] || codes[e.code] {
			t.Errorf("duplicate entry %d %s", e.code, e.name)
		}
		names[e.name], codes[e.code] = true, true
		if e.message == "" {
			t.Errorf("%s: no message", e.name)
		}
	}
	if len(ErrorCodes()) != len(errorTable) || ErrorCodes()[0] != NoError {
		t.Error("ErrorCodes does not list the table")
	}
}

func TestErrorCodeAsError(t *testing.T) {
	if ErrorForCode(0) != nil {
		t.Fatal("ErrorForCode(0) != nil")
	}
	err := fmt.Errorf("produce orders-0: %w", ErrorForCode(6))
	if !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatal("errors.Is through a wrap failed")
	}
	if errors.Is(err, ErrLeaderNotAvailable) {
		t.Fatal("matched the wrong code")
	}
	var code ErrorCode
	if !errors.As(err, &code) || code != ErrNotLeaderOrFollower || !code.Retriable() {
		t.Fatalf("errors.As: %v retriable=%v", code, code.Retriable())
	}
	if got := ErrNotLeaderOrFollower.Error(); got[:len("NOT_LEADER_OR_FOLLOWER: ")] != "NOT_LEADER_OR_FOLLOWER: " {
		t.Errorf("Error() = %q", got)
	}
	if ErrMessageTooLarge.Retriable() || !ErrNotEnoughReplicas.Retriable() || !ErrCorruptMessage.Retriable() {
		t.Error("retriable flags differ from Kafka's")
	}
	unknown := ErrorCode(12345)
	if unknown.Known() || unknown.Retriable() || unknown.Name() != "ERROR_CODE_12345" || ErrorForCode(12345) != unknown {
		t.Errorf("unknown code: %v %v %q", unknown.Known(), unknown.Retriable(), unknown.Name())
	}
	if NoError.Err() != nil || ErrOffsetOutOfRange.Err() != ErrOffsetOutOfRange {
		t.Error("Err()")
	}
	// CheckVersion answers with the protocol code, so servers can send it.
	if err := CheckVersion(Produce, 9); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("CheckVersion: %v", err)
	}
}
