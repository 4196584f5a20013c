package broker

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// The committed-offset records are read back from the offsets log by a new coordinator (groupCoordinator.replay):
// whatever bytes a record's key and value hold, the decoders must not panic, and what
// they accept must be exactly what the encoders write.

func offsetKeySeeds() [][]byte {
	valid := [][]byte{
		encodeOffsetKey(groupPartition{"g", topicPartition{"t", 0}}),
		encodeOffsetKey(groupPartition{"", topicPartition{"", 0}}),
		encodeOffsetKey(groupPartition{"my-group", topicPartition{"orders", 7}}),
		encodeOffsetKey(groupPartition{"g", topicPartition{"t", -1}}),
		encodeOffsetKey(groupPartition{"g", topicPartition{"t", math.MaxInt32}}),
	}
	k := valid[2]
	broken := [][]byte{
		nil,
		{0},
		{0, 0},
		{0, 1, 0, 0, 0, 0, 0, 0, 0, 0},       // version 1
		k[:len(k)-1],                         // partition cut short
		append(append([]byte(nil), k...), 0), // trailing byte
		{0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0}, // group length -1
		{0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0}, // topic length -1
		{0, 0, 0x7f, 0xff, 'g'},              // group length past the end
		{0, 0, 0, 1, 'g', 0, 9, 't'},         // topic length past the end
	}
	return append(valid, broken...)
}

func FuzzDecodeOffsetKey(f *testing.F) {
	for _, s := range offsetKeySeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gp, ok := decodeOffsetKey(data)
		if !ok {
			return // what a rejected decode returns is unused (replay skips the record)
		}
		// Exact: version 0 is the only version read, the string lengths and the fixed-size
		// partition leave no byte unaccounted for, and a length of 0xffff (null) is refused.
		if enc := encodeOffsetKey(gp); !bytes.Equal(enc, data) {
			t.Fatalf("key %x decoded to %+v, which encodes to %x", data, gp, enc)
		}
	})
}

func offsetValueSeeds() [][]byte {
	md, empty := "some metadata", ""
	valid := [][]byte{
		encodeOffsetValue(committed{offset: 42, leaderEpoch: 3}, 1700000000000),
		encodeOffsetValue(committed{offset: 0, leaderEpoch: -1, metadata: &empty}, 0),
		encodeOffsetValue(committed{offset: math.MaxInt64, leaderEpoch: math.MaxInt32, metadata: &md}, -1),
		encodeOffsetValue(committed{offset: -1, leaderEpoch: -1}, math.MinInt64),
	}
	v := valid[2]
	null := valid[0]
	broken := [][]byte{
		nil,
		{0, 0},
		v[:23], // shorter than the fixed part
		v[:len(v)-1],
		append(append([]byte(nil), v...), 0),
		append(append([]byte(nil), null...), 0), // null metadata, then a stray byte
		append([]byte{0, 1}, v[2:]...),          // version 1
		append(append([]byte(nil), v[:22]...), 0x7f, 0xff, 'x'), // metadata length past the end
		append(append([]byte(nil), v[:22]...), 0xff, 0xfe),      // length -2
	}
	return append(valid, broken...)
}

func FuzzDecodeOffsetValue(f *testing.F) {
	for _, s := range offsetValueSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ok := decodeOffsetValue(data)
		if !ok {
			// A rejected value may come back partly filled (a null metadata with trailing
			// bytes): replay ignores it when !ok, so only ok counts.
			return
		}
		// The commit time (bytes 14-22) is not decoded (nothing reads it back), so it is taken
		// from the input for the re-encoding; every other byte must come out the same.
		now := int64(binary.BigEndian.Uint64(data[14:]))
		if enc := encodeOffsetValue(c, now); !bytes.Equal(enc, data) {
			t.Fatalf("value %x decoded to %+v, which encodes to %x", data, c, enc)
		}
	})
}

func sameCommitted(a, b committed) bool {
	if a.offset != b.offset || a.leaderEpoch != b.leaderEpoch || (a.metadata == nil) != (b.metadata == nil) {
		return false
	}
	return a.metadata == nil || *a.metadata == *b.metadata
}

// FuzzOffsetRecord goes the other way: what handleOffsetCommit encodes, replay reads
// back as the same committed offset, and a null value deletes it.
func FuzzOffsetRecord(f *testing.F) {
	f.Add("g", "t", int32(0), int64(42), int32(3), int64(1700000000000), "", false)
	f.Add("my-group", "orders", int32(7), int64(-1), int32(-1), int64(0), "meta", true)
	f.Add("", "", int32(-1), int64(math.MaxInt64), int32(math.MinInt32), int64(-1), "", true)
	f.Fuzz(func(t *testing.T, group, topic string, partition int32, offset int64, epoch int32, now int64, md string, hasMD bool) {
		// The wire caps these strings at an int16 length (and a topic name far lower, metadata
		// at offsetMetadataMaxBytes), so longer ones never reach the encoders.
		if len(group) > math.MaxInt16 || len(topic) > math.MaxInt16 || len(md) > offsetMetadataMaxBytes {
			return
		}
		gp := groupPartition{group, topicPartition{topic, partition}}
		c := committed{offset: offset, leaderEpoch: epoch}
		if hasMD {
			c.metadata = &md
		}
		key, value := encodeOffsetKey(gp), encodeOffsetValue(c, now)
		if got, ok := decodeOffsetKey(key); !ok || got != gp {
			t.Fatalf("key %+v: decoded %+v, %v", gp, got, ok)
		}
		if got, ok := decodeOffsetValue(value); !ok || !sameCommitted(got, c) {
			t.Fatalf("value %+v: decoded %+v, %v", c, got, ok)
		}
	})
}
