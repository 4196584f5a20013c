package wire

// Kafka's consumer embedded protocol: the bytes a consumer group's members exchange through
// the coordinator, inside JoinGroupProtocol.Metadata (a ConsumerSubscription) and
// SyncGroupAssignment.Assignment (a ConsumerAssignment), under protocol type "consumer". The
// encoding is Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment (non-flexible
// versions): an int16 version, then the fields of that version. A decoder reads the fields of
// the versions it knows and ignores what a newer version adds after them, as Kafka's does, so
// a Sluice client and a Kafka client of any version can share a group.

// ConsumerProtocolType is the protocol type of consumer groups.
const ConsumerProtocolType = "consumer"

// ConsumerSubscriptionVersion is the newest ConsumerSubscription version this package writes
// and reads.
const ConsumerSubscriptionVersion = 3

// ConsumerSubscription is a member's subscription: what it asks the leader to assign from.
type ConsumerSubscription struct {
	Version         int16
	Topics          []string
	UserData        []byte
	OwnedPartitions []ConsumerTopicPartitions // v1+: what it owns now (cooperative rebalancing)
	GenerationID    int32                     // v2+: the generation of OwnedPartitions; -1 unknown
	RackID          *string                   // v3+
}

// ConsumerAssignment is what the leader assigned a member.
type ConsumerAssignment struct {
	Version    int16
	Partitions []ConsumerTopicPartitions
	UserData   []byte
}

// ConsumerTopicPartitions is one topic's partitions.
type ConsumerTopicPartitions struct {
	Topic      string
	Partitions []int32
}

const minConsumerTopicPartitions = sizeString + sizeArray

// AppendTo appends the subscription's encoding in its Version (at most
// ConsumerSubscriptionVersion).
func (s *ConsumerSubscription) AppendTo(dst []byte) []byte {
	v := min(max(s.Version, 0), ConsumerSubscriptionVersion)
	dst = appendInt16(dst, v)
	dst = appendStrings(dst, s.Topics)
	dst = appendBytes(dst, s.UserData)
	if v >= 1 {
		dst = appendArray(dst, s.OwnedPartitions)
	}
	if v >= 2 {
		dst = appendInt32(dst, s.GenerationID)
	}
	if v >= 3 {
		dst = appendNullableString(dst, s.RackID)
	}
	return dst
}

// ReadFrom decodes b into s. UserData aliases b. Bytes after the fields of the versions this
// package knows are ignored (a newer version's).
func (s *ConsumerSubscription) ReadFrom(b []byte) error {
	r := reader{b: b}
	s.Version = r.int16()
	if r.err == nil && s.Version < 0 {
		r.fail(ErrInvalidLength)
	}
	s.Topics = r.strings(s.Topics)
	s.UserData = r.bytes()
	s.OwnedPartitions, s.GenerationID, s.RackID = s.OwnedPartitions[:0], -1, nil
	if s.Version >= 1 {
		s.OwnedPartitions = readConsumerTopicPartitions(&r, s.OwnedPartitions)
	}
	if s.Version >= 2 {
		s.GenerationID = r.int32()
	}
	if s.Version >= 3 {
		s.RackID = r.nullableString()
	}
	return r.err
}

// AppendTo appends the assignment's encoding (every version has the same fields).
func (a *ConsumerAssignment) AppendTo(dst []byte) []byte {
	dst = appendInt16(dst, max(a.Version, 0))
	dst = appendArray(dst, a.Partitions)
	return appendBytes(dst, a.UserData)
}

// ReadFrom decodes b into a. UserData aliases b; trailing bytes of a newer version are
// ignored. An empty b is an empty assignment (Kafka's leader sends none to a member it gives
// nothing).
func (a *ConsumerAssignment) ReadFrom(b []byte) error {
	if len(b) == 0 {
		*a = ConsumerAssignment{}
		return nil
	}
	r := reader{b: b}
	a.Version = r.int16()
	if r.err == nil && a.Version < 0 {
		r.fail(ErrInvalidLength)
	}
	a.Partitions = readConsumerTopicPartitions(&r, a.Partitions)
	a.UserData = r.bytes()
	return r.err
}

func readConsumerTopicPartitions(r *reader, s []ConsumerTopicPartitions) []ConsumerTopicPartitions {
	s = readSlice(r, s, minConsumerTopicPartitions)
	for i := range s {
		s[i].Topic = r.stringReuse(s[i].Topic)
		s[i].Partitions = r.int32s(s[i].Partitions)
	}
	return s
}

func (t *ConsumerTopicPartitions) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Topic)
	return appendInt32s(dst, t.Partitions)
}
