package client

import (
	"math/rand/v2"
	"sync/atomic"
)

// PartitionAny in Record.Partition asks the producer to choose the partition (Kafka's null
// partition): the Partitioner decides, and for keyless records the default one leaves it to
// sticky partitioning.
const PartitionAny int32 = -1

// Partitioner chooses the partition of a record sent with Partition == PartitionAny.
//
// Partition is called on the Send path, concurrently, and must not block. It returns a
// partition in [0, numPartitions), or PartitionAny to let the producer place the record with
// sticky partitioning (KIP-480), which is what DefaultPartitioner does for keyless records. key
// is nil for a null key; the partitioner must not keep or modify it.
type Partitioner interface {
	Partition(topic string, key []byte, numPartitions int32) int32
}

// PartitionerFunc adapts a function to the Partitioner interface.
type PartitionerFunc func(topic string, key []byte, numPartitions int32) int32

// Partition calls f.
func (f PartitionerFunc) Partition(topic string, key []byte, numPartitions int32) int32 {
	return f(topic, key, numPartitions)
}

// DefaultPartitioner is Kafka's default: a keyed record goes to KeyPartition(key), so a key
// lands on the same partition as with the Java client for the same partition count; a keyless
// record (nil key; an empty key is a key) goes to the topic's sticky partition, which changes
// each time a new batch has to be opened for it (KIP-480).
type DefaultPartitioner struct{}

// Partition implements Partitioner.
func (DefaultPartitioner) Partition(_ string, key []byte, numPartitions int32) int32 {
	if key == nil {
		return PartitionAny
	}
	return KeyPartition(key, numPartitions)
}

// KeyPartition is Kafka's partition for a key: toPositive(murmur2(key)) % numPartitions, where
// toPositive clears the sign bit (it is not an absolute value).
func KeyPartition(key []byte, numPartitions int32) int32 {
	return int32(uint32(Murmur2(key))&0x7fffffff) % numPartitions
}

// Murmur2 is the 32-bit MurmurHash2 variant of Kafka's Utils.murmur2 (seed 0x9747b28c, words
// read little-endian, the tail mixed as the Java switch falls through). The result is signed
// as in Java.
func Murmur2(data []byte) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(data)
	h := uint32(seed) ^ uint32(n)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch n - i {
	case 3:
		h ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// stickyPartition is a topic's current partition for keyless records (KIP-480). Reads are one
// atomic load; it changes only when a new batch has to be opened for the current one.
type stickyPartition struct {
	cur atomic.Int32
}

func (s *stickyPartition) init(numPartitions int32) {
	s.cur.Store(rand.Int32N(numPartitions))
}

// next moves the sticky partition away from prev, unless another sender already did, and
// returns the new one. It prefers partitions for which available reports a leader, as Kafka
// does, scanning from a random start.
func (s *stickyPartition) next(prev, numPartitions int32, available func(int32) bool) int32 {
	if cur := s.cur.Load(); cur != prev || numPartitions <= 1 {
		return cur
	}
	start := rand.Int32N(numPartitions)
	choice := (prev + 1 + rand.Int32N(numPartitions-1)) % numPartitions // fallback: any other
	for i := range numPartitions {
		c := (start + i) % numPartitions
		if c != prev && available(c) {
			choice = c
			break
		}
	}
	if s.cur.CompareAndSwap(prev, choice) {
		return choice
	}
	return s.cur.Load()
}
