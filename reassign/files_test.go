package reassign

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Kafka's documented files (docs/ops.html, "Automatically migrating data to new machines",
// "Custom partition assignment", "Increasing replication factor", and kafka-leader-election's
// --path-to-json-file help) parse, format as Kafka prints, and parse again to the same thing.
// The docs print "log_dirs":["any"] under two replicas, which Kafka's own parser refuses; we
// take it for "any" per replica.
var kafkaPlans = []struct {
	name, file, formatted string
}{
	{"generate's current assignment", `{"version":1,
 "partitions":[{"topic":"foo1","partition":0,"replicas":[2,1],"log_dirs":["any"]},
               {"topic":"foo1","partition":1,"replicas":[1,3],"log_dirs":["any"]},
               {"topic":"foo1","partition":2,"replicas":[3,4],"log_dirs":["any"]},
               {"topic":"foo2","partition":0,"replicas":[4,2],"log_dirs":["any"]},
               {"topic":"foo2","partition":1,"replicas":[2,1],"log_dirs":["any"]},
               {"topic":"foo2","partition":2,"replicas":[1,3],"log_dirs":["any"]}]
}`, `{"version":1,"partitions":[{"topic":"foo1","partition":0,"replicas":[2,1],"log_dirs":["any","any"]},` +
		`{"topic":"foo1","partition":1,"replicas":[1,3],"log_dirs":["any","any"]},` +
		`{"topic":"foo1","partition":2,"replicas":[3,4],"log_dirs":["any","any"]},` +
		`{"topic":"foo2","partition":0,"replicas":[4,2],"log_dirs":["any","any"]},` +
		`{"topic":"foo2","partition":1,"replicas":[2,1],"log_dirs":["any","any"]},` +
		`{"topic":"foo2","partition":2,"replicas":[1,3],"log_dirs":["any","any"]}]}`},
	{"custom reassignment", `{"version":1,"partitions":[{"topic":"foo1","partition":0,"replicas":[5,6]},{"topic":"foo2","partition":1,"replicas":[2,3]}]}`,
		`{"version":1,"partitions":[{"topic":"foo1","partition":0,"replicas":[5,6],"log_dirs":["any","any"]},{"topic":"foo2","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}`},
	{"increase replication factor", `{"version":1,
 "partitions":[{"topic":"foo","partition":0,"replicas":[5,6,7]}]}`,
		`{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[5,6,7],"log_dirs":["any","any","any"]}]}`},
	{"rollback of increase replication factor", `{"version":1,
 "partitions":[{"topic":"foo","partition":0,"replicas":[5],"log_dirs":["any"]}]}`,
		`{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[5],"log_dirs":["any"]}]}`},
	{"the issue's example", `{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}`,
		`{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}`},
	{"no version, unsorted, a log dir", `{"partitions":[{"topic":"b","partition":1,"replicas":[3],"log_dirs":["/data/b"]},{"topic":"a","partition":7,"replicas":[]}]}`,
		`{"version":1,"partitions":[{"topic":"a","partition":7,"replicas":[],"log_dirs":[]},{"topic":"b","partition":1,"replicas":[3],"log_dirs":["/data/b"]}]}`},
}

func TestPlanKafkaExamplesRoundTrip(t *testing.T) {
	for _, tc := range kafkaPlans {
		p, err := ParsePlan([]byte(tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := string(p.Format())
		if got != tc.formatted {
			t.Errorf("%s: Format\n%s\nwant\n%s", tc.name, got, tc.formatted)
		}
		again, err := ParsePlan([]byte(got))
		if err != nil {
			t.Errorf("%s: reparse: %v", tc.name, err)
			continue
		}
		sorted := Plan{Version: p.Version, Partitions: slices.Clone(p.Partitions)}
		sortParts(sorted.Partitions)
		if !reflect.DeepEqual(again, sorted) {
			t.Errorf("%s: parse → format → parse\n%+v\nwant\n%+v", tc.name, again, sorted)
		}
		if m, err := p.MarshalJSON(); err != nil || string(m) != got {
			t.Errorf("%s: MarshalJSON %s, %v", tc.name, m, err)
		}
	}
}

func TestTopicsToMoveKafkaExample(t *testing.T) {
	for _, file := range []string{
		"{\n  \"topics\": [\n    { \"topic\": \"foo1\" },\n    { \"topic\": \"foo2\" }\n  ],\n  \"version\": 1\n}",
		`{"topics":[{"topic":"foo1"},{"topic":"foo2"}]}`,
	} {
		got, err := ParseTopicsToMove([]byte(file))
		want := TopicsToMove{Version: 1, Topics: []TopicRef{{"foo1"}, {"foo2"}}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v, %v", file, got, err)
		}
		f := string(got.Format())
		if f != `{"version":1,"topics":[{"topic":"foo1"},{"topic":"foo2"}]}` {
			t.Fatalf("Format: %s", f)
		}
		if again, err := ParseTopicsToMove([]byte(f)); err != nil || !reflect.DeepEqual(again, want) {
			t.Fatalf("reparse: %+v, %v", again, err)
		}
	}
}

func TestElectionPlanKafkaExample(t *testing.T) {
	file := "{\"partitions\":\n\t[{\"topic\": \"foo\", \"partition\": 1},\n\t {\"topic\": \"foobar\", \"partition\": 2}]\n}"
	got, err := ParseElectionPlan([]byte(file))
	want := ElectionPlan{Partitions: []PartitionRef{{"foo", 1}, {"foobar", 2}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, %v", got, err)
	}
	f := string(got.Format())
	if f != `{"partitions":[{"topic":"foo","partition":1},{"topic":"foobar","partition":2}]}` {
		t.Fatalf("Format: %s", f)
	}
	if again, err := ParseElectionPlan([]byte(f)); err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("reparse: %+v, %v", again, err)
	}
}

// Every refusal says where (line:column) and, past the JSON grammar, which field.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func([]byte) error
		file  string
		want  string
	}{
		{"topics: not JSON", topics, `{"topics": [}`, "line 1, column 13: malformed JSON: invalid character '}' looking for beginning of value"},
		{"topics: truncated", topics, "{\"topics\": [\n", "line 2, column 1: malformed JSON: unexpected end of file"},
		{"topics: empty file", topics, "", "line 1, column 1: malformed JSON: unexpected end of file"},
		{"topics: trailing data", topics, `{"topics":[]} {}`, "line 1, column 15: unexpected data after the top-level value"},
		{"topics: unknown field", topics, "{\"version\":1,\n \"topic\":[]}", `line 2, column 2: topic: unknown field "topic" (want "version", "topics")`},
		{"topics: missing", topics, `{"version":1}`, `line 1, column 1: topics: missing field "topics"`},
		{"topics: version 2", topics, `{"version":2,"topics":[]}`, "line 1, column 12: version: unsupported version 2 (want 1)"},
		{"topics: version string", topics, `{"version":"1","topics":[]}`, "line 1, column 12: version: want an integer, got a string"},
		{"topics: version 1.0", topics, `{"version":1.0,"topics":[]}`, "line 1, column 12: version: want an integer from -2147483648 to 2147483647, got 1.0"},
		{"topics: entry not an object", topics, `{"topics":["foo"]}`, "line 1, column 12: topics[0]: want an object, got a string"},
		{"topics: topic not a string", topics, "{\"topics\":[\n  {\"topic\":\"a\"},\n  {\"topic\":7}]}", "line 3, column 12: topics[1].topic: want a string, got a number"},
		{"topics: twice", topics, `{"topics":[{"topic":"a"},{"topic":"a"}]}`, `line 1, column 35: topics[1].topic: topic "a" is listed twice`},
		{"topics: field twice", topics, `{"topics":[],"topics":[]}`, `line 1, column 14: topics: field "topics" given twice`},
		{"topics: top level array", topics, `[]`, "line 1, column 1: want an object, got an array"},
		{"plan: partition too big", plan, `{"partitions":[{"topic":"a","partition":2147483648,"replicas":[1]}]}`, "line 1, column 41: partitions[0].partition: want an integer from -2147483648 to 2147483647, got 2147483648"},
		{"plan: replica not a number", plan, "{\"partitions\":[{\"topic\":\"a\",\"partition\":0,\n\"replicas\":[1,\"2\"]}]}", `line 2, column 15: partitions[0].replicas[1]: want an integer, got a string`},
		{"plan: replicas missing", plan, `{"partitions":[{"topic":"a","partition":0}]}`, `line 1, column 16: partitions[0].replicas: missing field "replicas"`},
		{"plan: log dirs mismatch", plan, `{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["/d"]}]}`, "line 1, column 71: partitions[0].log_dirs: 1 log dirs for 2 replicas (want one per replica)"},
		{"plan: unknown field", plan, `{"partitions":[{"topic":"a","partition":0,"replica":[1]}]}`, `line 1, column 43: partitions[0].replica: unknown field "replica" (want "topic", "partition", "replicas", "log_dirs")`},
		{"plan: non-ASCII column", plan, "{\"partitions\":[{\"topic\":\"é\",\"partition\":x}]}", "line 1, column 41: malformed JSON: invalid character 'x' looking for beginning of value"},
		{"election: version refused", election, `{"version":1,"partitions":[]}`, `line 1, column 2: version: unknown field "version" (want "partitions")`},
		{"election: missing partitions", election, `{}`, `line 1, column 1: partitions: missing field "partitions"`},
		{"election: twice", election, `{"partitions":[{"topic":"a","partition":1},{"topic":"a","partition":1}]}`, "line 1, column 44: partitions[1]: partition a-1 is listed twice"},
		{"election: deep nesting", election, strings.Repeat("[", 100), "line 1, column 65: nested too deeply"},
	} {
		err := tc.parse([]byte(tc.file))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", tc.name, err, tc.want)
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %T is not a *ParseError matching ErrMalformed", tc.name, err)
		}
	}
}

func topics(b []byte) error   { _, err := ParseTopicsToMove(b); return err }
func plan(b []byte) error     { _, err := ParsePlan(b); return err }
func election(b []byte) error { _, err := ParseElectionPlan(b); return err }

// Validate lists every problem at once, as the controller refuses a plan as a whole.
func TestPlanValidate(t *testing.T) {
	p, err := ParsePlan([]byte(`{"version":1,"partitions":[
		{"topic":"a","partition":0,"replicas":[1,2,1]},
		{"topic":"a","partition":1,"replicas":[]},
		{"topic":"a","partition":0,"replicas":[3]},
		{"topic":"b","partition":-1,"replicas":[-4]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	err = p.Validate()
	want := "reassign: invalid plan: a-0: broker 1 twice; a-1: empty replica list; a-0: listed twice; b--1: negative partition; b--1: negative broker id -4"
	if err == nil || err.Error() != want || !errors.Is(err, ErrInvalidPlan) {
		t.Fatalf("Validate: %v\nwant %s", err, want)
	}
	if err := (Plan{}).Validate(); err == nil || !strings.Contains(err.Error(), "no partitions") {
		t.Fatalf("an empty plan: %v", err)
	}
	ok, _ := ParsePlan([]byte(kafkaPlans[2].file))
	if err := ok.Validate(); err != nil {
		t.Fatalf("Kafka's increase-replication-factor.json: %v", err)
	}
}

// Format escapes as Kafka's Jackson does (quote, backslash, control characters), and its output
// reads back to the same names.
func TestFormatEscapes(t *testing.T) {
	p := Plan{Partitions: []PartitionPlan{{Topic: "a\"b\\c\n\x01<&>é", Partition: 3, Replicas: []int32{2}, LogDirs: []string{"/x"}}}}
	got := string(p.Format())
	want := `{"version":1,"partitions":[{"topic":"a\"b\\c\n\u0001<&>é","partition":3,"replicas":[2],"log_dirs":["/x"]}]}`
	if got != want {
		t.Fatalf("Format: %s\nwant %s", got, want)
	}
	again, err := ParsePlan([]byte(got))
	if err != nil || again.Partitions[0].Topic != p.Partitions[0].Topic {
		t.Fatalf("reparse: %+v, %v", again, err)
	}
}

func sortParts(ps []PartitionPlan) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && comparePartitions(ps[j-1], ps[j]) > 0; j-- {
			ps[j-1], ps[j] = ps[j], ps[j-1]
		}
	}
}
