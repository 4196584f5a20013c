// Package coordinator is Kafka's rule for where a consumer group lives, which brokers and
// clients must agree on: a group's committed offsets are records in partition
// abs(javaHashCode(group.id)) % partitions of __consumer_offsets (Kafka's
// GroupCoordinator.partitionFor, offsets.topic.num.partitions of them, 50 by default), and the
// leader of that partition is the group's coordinator. Pure: no state, no I/O.
package coordinator

import (
	"math"
	"unicode/utf16"
)

// Partition is the __consumer_offsets partition of groupID, in a topic of partitions partitions
// (0 when partitions is not positive).
func Partition(groupID string, partitions int32) int32 {
	if partitions <= 0 {
		return 0
	}
	return javaAbs(javaHashCode(groupID)) % partitions
}

// javaHashCode is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over the string's UTF-16
// code units, in wrapping 32-bit arithmetic. Bytes that are not UTF-8 count as U+FFFD, as
// Java's decoder of the wire's string replaces them.
func javaHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
			continue
		}
		h = 31*h + r
	}
	return h
}

// javaAbs is Kafka's Utils.abs: the absolute value, with math.MinInt32 (which has none in 32
// bits) mapped to 0.
func javaAbs(n int32) int32 {
	switch {
	case n == math.MinInt32:
		return 0
	case n < 0:
		return -n
	}
	return n
}
