package producerstate

import "github.com/sluicemq/sluice/batch"

// AppendSnapshot appends the encoding of the state as of offset (every batch below it
// applied) to dst: a versioned header, the entries by producer id, and a CRC32C of all of it,
// so that a torn or damaged file is detected.
func (s *State) AppendSnapshot(dst []byte, offset batch.Offset) []byte {
	panic("producerstate: not built yet")
}

// DecodeSnapshot decodes a snapshot: the state and the offset it is as of. Every length is
// bounded before anything is allocated; anything that does not decode, or fails the CRC, is
// ErrCorruptSnapshot (wrapped with what was wrong). Never panics.
func DecodeSnapshot(data []byte) (*State, batch.Offset, error) {
	panic("producerstate: not built yet")
}
