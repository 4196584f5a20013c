package wire

import "unicode/utf16"

// Group coordinator placement. Sluice has no FindCoordinator yet: a group's coordinator is the
// leader of the group's partition of __consumer_offsets, which a client computes as Kafka's
// broker does (GroupMetadataManager.partitionFor), so that the brokers and every client agree.

// DefaultOffsetsTopicPartitions is offsets.topic.num.partitions' default (Kafka's 50).
const DefaultOffsetsTopicPartitions = 50

// JavaStringHashCode is Java's String.hashCode of s: over its UTF-16 code units,
// h = 31*h + unit, in wrapping 32-bit arithmetic. s is UTF-8; an invalid byte counts as
// U+FFFD, as Java's decoding of such bytes gives.
func JavaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + int32(hi)
			h = 31*h + int32(lo)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// GroupPartition is the partition of __consumer_offsets, of partitions, that holds group's
// offsets: Kafka's Utils.abs(groupId.hashCode()) % partitions, where abs(MinInt32) is 0.
// partitions below 1 count as 1.
func GroupPartition(group string, partitions int32) int32 {
	h := JavaStringHashCode(group)
	switch {
	case h == -1<<31:
		h = 0
	case h < 0:
		h = -h
	}
	return h % max(partitions, 1)
}
