package broker

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/index"
)

// prop is one property being set: the key as given (an alias names itself in errors) and its
// value. Its methods are the parsers the registry's entries (configkeys.go) are built from;
// each error names the key and the value.
type prop struct{ key, value string }

// long parses an integer property and checks it against r (see bounds).
func (p prop) long(r bounds) (int64, error) {
	n, err := strconv.ParseInt(p.value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not an integer", p.key, p.value)
	}
	if n == 0 && r.zero != "" {
		return 0, fmt.Errorf("%s: 0 is not supported: %s", p.key, r.zero)
	}
	if n < r.lo || n > r.hi {
		if r.why != "" {
			return 0, fmt.Errorf("%s: %d is out of range %s: %s", p.key, n, r, r.why)
		}
		return 0, fmt.Errorf("%s: %d is out of range %s", p.key, n, r)
	}
	if r.topic != "" {
		// The property is the broker-wide default of a topic config: the topic-level rule
		// applies to it too (segment.bytes at least 14, ...), by the same validation.
		if err := cluster.ValidateTopicConfigs(map[string]string{r.topic: strconv.FormatInt(n, 10)}); err != nil {
			return 0, fmt.Errorf("%s: %d is out of range as the default of topic config %s (%w)", p.key, n, r.topic, err)
		}
	}
	return n, nil
}

func (p prop) i64(dst *int64, r bounds) error {
	n, err := p.long(r)
	if err != nil {
		return err
	}
	*dst = n
	return nil
}

// integer takes a count the broker later narrows (to int32 in requests and metadata, int16
// for a replication factor): a value outside [lo, hi] is refused here rather than wrapped
// there.
func (p prop) integer(dst *int, lo, hi int64) error {
	n, err := p.long(bounds{lo: lo, hi: hi})
	if err != nil {
		return err
	}
	*dst = int(n)
	return nil
}

// dur takes a count of unit; -1 (where r allows it) and counts too large for a Duration become
// cluster.Forever.
func (p prop) dur(dst *time.Duration, unit time.Duration, r bounds) error {
	n, err := p.long(r)
	if err != nil {
		return err
	}
	if n < 0 || n >= math.MaxInt64/int64(unit) {
		*dst = cluster.Forever
	} else {
		*dst = time.Duration(n) * unit
	}
	return nil
}

func (p prop) boolean(dst *bool) error {
	b, err := strconv.ParseBool(p.value)
	if err != nil {
		return fmt.Errorf("%s: %q is not true or false", p.key, p.value)
	}
	*dst = b
	return nil
}

// only accepts the one value Sluice implements of a Kafka property whose other values would
// change what the broker does (a compacting cleanup.policy, a recompressing compression.type):
// accepting those and ignoring them would store data otherwise than the file asks.
func (p prop) only(want, why string) error {
	if p.value != want {
		return fmt.Errorf("%s: %q is not supported: only %s (%s)", p.key, p.value, want, why)
	}
	return nil
}

// bounds is the range of a numeric property, checked in this order: zero, when set, says why
// a 0 that Kafka accepts with a meaning of its own is refused (the Config field cannot tell it
// from unset, so it would silently become the default); then [lo, hi]; then, when topic is
// set, the rule of that topic config (the property is the broker-wide default of it).
type bounds struct {
	lo, hi int64
	topic  string
	zero   string
	why    string // why lo or hi, when they are Sluice's and not Kafka's
}

// String is the range, "..." standing for no upper bound, without the 0 that zero refuses.
func (r bounds) String() string {
	lo, hi := strconv.FormatInt(r.lo, 10), strconv.FormatInt(r.hi, 10)
	if r.hi == math.MaxInt64 {
		hi = "..."
	}
	if r.zero != "" && r.lo < 0 && r.hi > 0 {
		if r.lo == -1 {
			return "-1 or [1, " + hi + "]"
		}
		return "[" + lo + ", -1] or [1, " + hi + "]"
	}
	return "[" + lo + ", " + hi + "]"
}

// positiveMs is a duration property in milliseconds from 1.
var positiveMs = bounds{lo: 1, hi: math.MaxInt64}

// minIndexBytes is the smallest log.index.size.max.bytes: one entry of the larger index.
const minIndexBytes = max(index.OffsetEntrySize, index.TimeEntrySize)

// retentionTime is log.retention.ms and its .minutes and .hours forms: -1 keeps forever, as in
// Kafka; Kafka's 0 cannot be told from unset.
func retentionTime(hi int64, topic string) bounds {
	return bounds{lo: -1, hi: hi, topic: topic,
		zero: unset("delete every segment, the active one too", "log.retention.ms=1 is the nearest")}
}

// unset explains the refusal of a 0 to which Kafka gives a meaning, with an alternative.
func unset(kafka, instead string) string {
	s := "Kafka's 0 (" + kafka + ") cannot be told from unset (the default) in Sluice's Config"
	if instead != "" {
		s += "; " + instead
	}
	return s
}

// sluiceBytes is Sluice's own size properties: -1 turns the feature off, and 0, which would
// be taken as unset, is refused.
func sluiceBytes(off string) bounds {
	return bounds{lo: -1, hi: math.MaxInt64, zero: "0 would be taken as unset (the default); " + off}
}
