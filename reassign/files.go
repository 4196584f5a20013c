package reassign

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// AnyLogDir is the log_dirs entry that leaves the replica's directory to its broker (Kafka's
// "any"; Sluice brokers have one data directory).
const AnyLogDir = "any"

// TopicsToMove is kafka-reassign-partitions' --topics-to-move-json-file:
//
//	{"version":1,"topics":[{"topic":"foo"}]}
type TopicsToMove struct {
	Version int
	Topics  []TopicRef
}

// TopicRef is one entry of TopicsToMove.
type TopicRef struct{ Topic string }

// Plan is kafka-reassign-partitions' --reassignment-json-file, and what --generate prints:
//
//	{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}
type Plan struct {
	Version    int
	Partitions []PartitionPlan
}

// PartitionPlan is one partition's replicas, preferred leader first. LogDirs has one entry
// per replica (ParsePlan fills AnyLogDir where the file gives none).
type PartitionPlan struct {
	Topic     string
	Partition int32
	Replicas  []int32
	LogDirs   []string
}

// ElectionPlan is kafka-leader-election's --path-to-json-file (it has no version field):
//
//	{"partitions":[{"topic":"foo","partition":1}]}
type ElectionPlan struct {
	Partitions []PartitionRef
}

// PartitionRef names one partition.
type PartitionRef struct {
	Topic     string
	Partition int32
}

func (r PartitionRef) String() string { return r.Topic + "-" + strconv.Itoa(int(r.Partition)) }

// ParseTopicsToMove reads a topics-to-move file. Kafka's reading, stricter: "version" may be
// left out (it is then 1) but must be 1; "topics" is required; a field Kafka does not know is
// refused rather than ignored, and so is a field given twice. A topic named twice is refused,
// as Kafka does.
func ParseTopicsToMove(b []byte) (TopicsToMove, error) {
	root, err := parseTree(b)
	if err != nil {
		return TopicsToMove{}, err
	}
	s := schema{src: b}
	fields, err := s.object(root, "", "version", "topics")
	if err != nil {
		return TopicsToMove{}, err
	}
	out := TopicsToMove{}
	if out.Version, err = s.version(fields); err != nil {
		return TopicsToMove{}, err
	}
	tv, err := s.required(root, fields, "", "topics")
	if err != nil {
		return TopicsToMove{}, err
	}
	elems, err := s.array(tv, "topics")
	if err != nil {
		return TopicsToMove{}, err
	}
	seen := map[string]bool{}
	out.Topics = []TopicRef{}
	for i, e := range elems {
		name := index("topics", i)
		f, err := s.object(e, name, "topic")
		if err != nil {
			return TopicsToMove{}, err
		}
		v, err := s.required(e, f, name, "topic")
		if err != nil {
			return TopicsToMove{}, err
		}
		topic, err := s.str(v, join(name, "topic"))
		if err != nil {
			return TopicsToMove{}, err
		}
		if seen[topic] {
			return TopicsToMove{}, s.errorf(v, join(name, "topic"), "topic %q is listed twice", topic)
		}
		seen[topic] = true
		out.Topics = append(out.Topics, TopicRef{Topic: topic})
	}
	return out, nil
}

// ParsePlan reads a reassignment file. As Kafka: "version" optional (1) and must be 1;
// "log_dirs" optional, one entry per replica. Stricter than Kafka: unknown or repeated fields
// are refused. Kafka's own documentation prints "log_dirs":["any"] under two replicas, which
// Kafka refuses; a list of only "any" of another length is taken here for "any" per replica.
// ParsePlan checks the shape only: Validate checks the contents.
func ParsePlan(b []byte) (Plan, error) {
	root, err := parseTree(b)
	if err != nil {
		return Plan{}, err
	}
	s := schema{src: b}
	fields, err := s.object(root, "", "version", "partitions")
	if err != nil {
		return Plan{}, err
	}
	out := Plan{}
	if out.Version, err = s.version(fields); err != nil {
		return Plan{}, err
	}
	pv, err := s.required(root, fields, "", "partitions")
	if err != nil {
		return Plan{}, err
	}
	elems, err := s.array(pv, "partitions")
	if err != nil {
		return Plan{}, err
	}
	out.Partitions = []PartitionPlan{}
	for i, e := range elems {
		pp, err := s.partitionPlan(e, index("partitions", i))
		if err != nil {
			return Plan{}, err
		}
		out.Partitions = append(out.Partitions, pp)
	}
	return out, nil
}

func (s schema) partitionPlan(e value, name string) (PartitionPlan, error) {
	f, err := s.object(e, name, "topic", "partition", "replicas", "log_dirs")
	if err != nil {
		return PartitionPlan{}, err
	}
	ref, err := s.partitionRef(e, f, name)
	if err != nil {
		return PartitionPlan{}, err
	}
	pp := PartitionPlan{Topic: ref.Topic, Partition: ref.Partition, Replicas: []int32{}}
	rv, err := s.required(e, f, name, "replicas")
	if err != nil {
		return PartitionPlan{}, err
	}
	reps, err := s.array(rv, join(name, "replicas"))
	if err != nil {
		return PartitionPlan{}, err
	}
	for j, r := range reps {
		id, err := s.int32(r, index(join(name, "replicas"), j))
		if err != nil {
			return PartitionPlan{}, err
		}
		pp.Replicas = append(pp.Replicas, id)
	}
	dv, ok := f["log_dirs"]
	if !ok {
		pp.LogDirs = anyDirs(len(pp.Replicas))
		return pp, nil
	}
	dirs, err := s.array(dv, join(name, "log_dirs"))
	if err != nil {
		return PartitionPlan{}, err
	}
	allAny := true
	pp.LogDirs = []string{}
	for j, d := range dirs {
		dir, err := s.str(d, index(join(name, "log_dirs"), j))
		if err != nil {
			return PartitionPlan{}, err
		}
		allAny = allAny && dir == AnyLogDir
		pp.LogDirs = append(pp.LogDirs, dir)
	}
	switch {
	case len(pp.LogDirs) == len(pp.Replicas):
	case allAny:
		pp.LogDirs = anyDirs(len(pp.Replicas))
	default:
		return PartitionPlan{}, s.errorf(dv, join(name, "log_dirs"), "%d log dirs for %d replicas (want one per replica)", len(pp.LogDirs), len(pp.Replicas))
	}
	return pp, nil
}

func (s schema) partitionRef(e value, f map[string]value, name string) (PartitionRef, error) {
	tv, err := s.required(e, f, name, "topic")
	if err != nil {
		return PartitionRef{}, err
	}
	topic, err := s.str(tv, join(name, "topic"))
	if err != nil {
		return PartitionRef{}, err
	}
	nv, err := s.required(e, f, name, "partition")
	if err != nil {
		return PartitionRef{}, err
	}
	n, err := s.int32(nv, join(name, "partition"))
	if err != nil {
		return PartitionRef{}, err
	}
	return PartitionRef{Topic: topic, Partition: n}, nil
}

func anyDirs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = AnyLogDir
	}
	return out
}

// ParseElectionPlan reads kafka-leader-election's file: "partitions" required, each entry a
// topic and a partition, a partition listed twice refused (as Kafka); unknown fields refused.
func ParseElectionPlan(b []byte) (ElectionPlan, error) {
	root, err := parseTree(b)
	if err != nil {
		return ElectionPlan{}, err
	}
	s := schema{src: b}
	fields, err := s.object(root, "", "partitions")
	if err != nil {
		return ElectionPlan{}, err
	}
	pv, err := s.required(root, fields, "", "partitions")
	if err != nil {
		return ElectionPlan{}, err
	}
	elems, err := s.array(pv, "partitions")
	if err != nil {
		return ElectionPlan{}, err
	}
	out := ElectionPlan{Partitions: []PartitionRef{}}
	seen := map[PartitionRef]bool{}
	for i, e := range elems {
		name := index("partitions", i)
		f, err := s.object(e, name, "topic", "partition")
		if err != nil {
			return ElectionPlan{}, err
		}
		ref, err := s.partitionRef(e, f, name)
		if err != nil {
			return ElectionPlan{}, err
		}
		if seen[ref] {
			return ElectionPlan{}, s.errorf(e, name, "partition %s is listed twice", ref)
		}
		seen[ref] = true
		out.Partitions = append(out.Partitions, ref)
	}
	return out, nil
}

// Validate lists every problem of a plan's contents (Kafka's --execute checks): no partitions,
// a partition twice, an empty replica list, a replica twice, a negative partition or broker id.
// The error wraps ErrInvalidPlan; nil if there is none.
func (p Plan) Validate() error {
	var probs []string
	if len(p.Partitions) == 0 {
		probs = append(probs, "no partitions")
	}
	seen := map[PartitionRef]bool{}
	for _, pp := range p.Partitions {
		ref := PartitionRef{pp.Topic, pp.Partition}
		probs = append(probs, partitionProblems(pp)...)
		if seen[ref] {
			probs = append(probs, ref.String()+": listed twice")
		}
		seen[ref] = true
	}
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidPlan, strings.Join(probs, "; "))
}

func partitionProblems(pp PartitionPlan) []string {
	ref := PartitionRef{pp.Topic, pp.Partition}
	var probs []string
	if pp.Topic == "" {
		probs = append(probs, ref.String()+": no topic")
	}
	if pp.Partition < 0 {
		probs = append(probs, ref.String()+": negative partition")
	}
	if len(pp.Replicas) == 0 {
		probs = append(probs, ref.String()+": empty replica list")
	}
	if len(pp.LogDirs) != 0 && len(pp.LogDirs) != len(pp.Replicas) {
		probs = append(probs, fmt.Sprintf("%s: %d log dirs for %d replicas", ref, len(pp.LogDirs), len(pp.Replicas)))
	}
	for i, r := range pp.Replicas {
		if r < 0 {
			probs = append(probs, fmt.Sprintf("%s: negative broker id %d", ref, r))
		}
		if slices.Contains(pp.Replicas[:i], r) {
			probs = append(probs, fmt.Sprintf("%s: broker %d twice", ref, r))
		}
	}
	return probs
}

// Format prints p as kafka-reassign-partitions does: one line, the partitions sorted by topic
// and partition, version 1, and log_dirs with one entry per replica (AnyLogDir where LogDirs
// does not give one per replica).
func (p Plan) Format() []byte {
	parts := slices.Clone(p.Partitions)
	slices.SortStableFunc(parts, comparePartitions)
	b := []byte(`{"version":1,"partitions":[`)
	for i, pp := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"topic":`...)
		b = appendString(b, pp.Topic)
		b = append(b, `,"partition":`...)
		b = strconv.AppendInt(b, int64(pp.Partition), 10)
		b = append(b, `,"replicas":[`...)
		for j, r := range pp.Replicas {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(r), 10)
		}
		b = append(b, `],"log_dirs":[`...)
		for j := range pp.Replicas {
			if j > 0 {
				b = append(b, ',')
			}
			dir := AnyLogDir
			if len(pp.LogDirs) == len(pp.Replicas) {
				dir = pp.LogDirs[j]
			}
			b = appendString(b, dir)
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

// MarshalJSON is Format.
func (p Plan) MarshalJSON() ([]byte, error) { return p.Format(), nil }

// Format prints t as {"version":1,"topics":[{"topic":"foo"}]}, in t's order.
func (t TopicsToMove) Format() []byte {
	b := []byte(`{"version":1,"topics":[`)
	for i, tr := range t.Topics {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"topic":`...)
		b = appendString(b, tr.Topic)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// Format prints e as {"partitions":[{"topic":"foo","partition":1}]}, in e's order.
func (e ElectionPlan) Format() []byte {
	b := []byte(`{"partitions":[`)
	for i, r := range e.Partitions {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"topic":`...)
		b = appendString(b, r.Topic)
		b = append(b, `,"partition":`...)
		b = strconv.AppendInt(b, int64(r.Partition), 10)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func comparePartitions(a, b PartitionPlan) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// appendString appends s as a JSON string, escaping as Kafka's Jackson does: the quote, the
// backslash and control characters only (no HTML escapes). Invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '"':
			b = append(b, `\"`...)
		case r == '\\':
			b = append(b, `\\`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\b':
			b = append(b, `\b`...)
		case r == '\f':
			b = append(b, `\f`...)
		case r < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789ABCDEF"[r>>4], "0123456789ABCDEF"[r&0xf])
		default:
			b = append(b, string(r)...)
		}
	}
	return append(b, '"')
}
