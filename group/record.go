package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Errors decoding a record.
var (
	ErrShortRecord   = errors.New("group: record truncated")
	ErrRecordVersion = errors.New("group: unknown record version")
	ErrTrailingBytes = errors.New("group: trailing bytes after record")
	ErrBadRecord     = errors.New("group: malformed record")
)

const (
	keyVersion   = 2
	valueVersion = 3
)

// Record is a group snapshot for __consumer_offsets: Key is EncodeKey(Group), Value the
// GroupMetadataValue v3 (nil = tombstone). Generation is the generation it was taken at,
// the argument of PersistFailed.
type Record struct {
	Group      string
	Generation int32
	Value      []byte
}

// Key is the record's key.
func (r *Record) Key() []byte { return EncodeKey(r.Group) }

// EncodeKey is the GroupMetadataKey v2 of a group.
func EncodeKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, keyVersion)
	return appendString(b, group)
}

// DecodeKey reads a __consumer_offsets key. ok is false, with no error, for an offset key
// (versions 0 and 1), which is not the group's.
func DecodeKey(b []byte) (group string, ok bool, err error) {
	r := reader{b: b}
	v := r.i16()
	if r.err != nil {
		return "", false, r.err
	}
	switch v {
	case 0, 1:
		return "", false, nil
	case keyVersion:
	default:
		return "", false, fmt.Errorf("%w: key version %d", ErrRecordVersion, v)
	}
	group = r.str()
	if err := r.done(); err != nil {
		return "", false, err
	}
	return group, true, nil
}

// Snapshot is the group's record as of now.
func (g *Group) Snapshot(now time.Time) *Record {
	b := binary.BigEndian.AppendUint16(nil, valueVersion)
	b = appendString(b, g.protocolType)
	b = binary.BigEndian.AppendUint32(b, uint32(g.generation))
	b = appendNullable(b, g.protocol)
	b = appendNullable(b, g.leader)
	b = binary.BigEndian.AppendUint64(b, uint64(g.stateTimestamp.UnixMilli()))
	b = binary.BigEndian.AppendUint32(b, uint32(len(g.order)))
	for _, id := range g.order {
		m := g.members[id]
		b = appendString(b, m.id)
		b = appendNullable(b, m.instanceID)
		b = appendString(b, m.clientID)
		b = appendString(b, m.clientHost)
		b = binary.BigEndian.AppendUint32(b, uint32(ms(m.rebalanceTimeout)))
		b = binary.BigEndian.AppendUint32(b, uint32(ms(m.sessionTimeout)))
		b = appendBytes(b, m.metadata(g.protocol))
		b = appendBytes(b, m.assignment)
	}
	return &Record{Group: g.id, Generation: g.generation, Value: b}
}

func ms(d time.Duration) int32 { return int32(min(d.Milliseconds(), math.MaxInt32)) }

// Restore rebuilds a group from its last record value: Stable with its members (their
// sessions start at now) or Empty without. It never panics on a malformed value.
func Restore(id string, cfg Config, value []byte, now time.Time) (*Group, error) {
	g := New(id, cfg, now)
	if value == nil {
		return g, nil
	}
	r := reader{b: value}
	v := r.i16()
	if r.err == nil && (v < 0 || v > valueVersion) {
		return nil, fmt.Errorf("%w: value version %d", ErrRecordVersion, v)
	}
	g.protocolType = r.str()
	g.generation = r.i32()
	protocol, _ := r.nullable()
	leader, _ := r.nullable()
	if v >= 2 {
		if ts := r.i64(); r.err == nil && ts >= 0 {
			g.stateTimestamp = time.UnixMilli(ts)
		}
	}
	n := r.i32()
	if r.err == nil && (n < 0 || int(n) > len(r.b)) {
		return nil, fmt.Errorf("%w: %d members", ErrBadRecord, n)
	}
	for i := int32(0); i < n && r.err == nil; i++ {
		m := &member{}
		m.id = r.str()
		if v >= 3 {
			m.instanceID, _ = r.nullable()
		}
		m.clientID = r.str()
		m.clientHost = r.str()
		if v >= 1 {
			m.rebalanceTimeout = time.Duration(r.i32()) * time.Millisecond
		}
		m.sessionTimeout = time.Duration(r.i32()) * time.Millisecond
		if v == 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		sub := r.bytes()
		m.assignment = r.bytes()
		if r.err != nil {
			break
		}
		if _, dup := g.members[m.id]; dup || m.id == "" {
			return nil, fmt.Errorf("%w: member id %q repeated or empty", ErrBadRecord, m.id)
		}
		if m.instanceID != "" {
			if _, dup := g.static[m.instanceID]; dup {
				return nil, fmt.Errorf("%w: instance id %q repeated", ErrBadRecord, m.instanceID)
			}
			g.static[m.instanceID] = m.id
		}
		m.protocolType = g.protocolType
		m.protocols = []Protocol{{Name: protocol, Metadata: sub}}
		m.expires = now.Add(m.sessionTimeout)
		g.members[m.id] = m
		g.order = append(g.order, m.id)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	if len(g.members) > 0 {
		if _, ok := g.members[leader]; !ok {
			return nil, fmt.Errorf("%w: leader %q is not a member", ErrBadRecord, leader)
		}
		g.protocol, g.leader, g.state = protocol, leader, Stable
	}
	return g, nil
}

func appendString(b []byte, s string) []byte {
	if len(s) > math.MaxInt16 {
		s = s[:math.MaxInt16]
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// appendNullable writes "" as null.
func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return binary.BigEndian.AppendUint16(b, 0xffff)
	}
	return appendString(b, s)
}

func appendBytes(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// reader is a sticky-error big-endian reader.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = ErrShortRecord
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) i16() int16 {
	if v := r.take(2); v != nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (r *reader) i32() int32 {
	if v := r.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (r *reader) i64() int64 {
	if v := r.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (r *reader) str() string {
	n := r.i16()
	if r.err == nil && n < 0 {
		r.err = fmt.Errorf("%w: negative string length", ErrBadRecord)
	}
	return string(r.take(int(n)))
}

func (r *reader) nullable() (string, bool) {
	n := r.i16()
	if r.err == nil && n == -1 {
		return "", false
	}
	if r.err == nil && n < -1 {
		r.err = fmt.Errorf("%w: negative string length", ErrBadRecord)
	}
	return string(r.take(int(n))), true
}

func (r *reader) bytes() []byte {
	n := r.i32()
	if r.err == nil && n < 0 {
		// Kafka writes non-null bytes here; read null as empty.
		if n == -1 {
			return nil
		}
		r.err = fmt.Errorf("%w: negative bytes length", ErrBadRecord)
	}
	if v := r.take(int(n)); v != nil {
		return append([]byte(nil), v...)
	}
	return nil
}

func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return ErrTrailingBytes
	}
	return nil
}
