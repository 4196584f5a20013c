package reassign

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

// The parsers never panic; what they refuse is a *ParseError at a real position; what they
// accept formats to a file that reads back to the same thing (a plan: sorted).

func checkParseError(t *testing.T, b []byte, err error) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line < 1 || pe.Column < 1 || pe.Line > len(b)+1 {
		t.Fatalf("%q: error %v (%T) is not a *ParseError at a position in the file", b, err, err)
	}
}

func FuzzParseTopicsToMove(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"topics":[{"topic":"foo"}]}`,
		"{\n  \"topics\": [\n    { \"topic\": \"foo1\" },\n    { \"topic\": \"foo2\" }\n  ],\n  \"version\": 1\n}",
		`{"topics":[]}`, `{"topics":[{"topic":"a"},{"topic":"a"}]}`, `{"version":2,"topics":[]}`, `[`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseTopicsToMove(b)
		if err != nil {
			checkParseError(t, b, err)
			return
		}
		again, err := ParseTopicsToMove(got.Format())
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("%q: %+v formats as %s, which reads as %+v, %v", b, got, got.Format(), again, err)
		}
	})
}

func FuzzParsePlan(f *testing.F) {
	for _, tc := range kafkaPlans {
		f.Add([]byte(tc.file))
	}
	for _, s := range []string{
		`{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["/d"]}]}`,
		`{"partitions":[{"topic":"a\u0000\"","partition":-1,"replicas":[-1,1,1],"log_dirs":["any","x","any"]}]}`,
		`{"version":1,"partitions":[{"topic":"a","partition":2147483648,"replicas":[1]}]}`, `{"partitions":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParsePlan(b)
		if err != nil {
			checkParseError(t, b, err)
			return
		}
		_ = got.Validate()
		again, err := ParsePlan(got.Format())
		want := Plan{Version: got.Version, Partitions: slices.Clone(got.Partitions)}
		sortParts(want.Partitions)
		if err != nil || !reflect.DeepEqual(again, want) {
			t.Fatalf("%q: %+v formats as %s, which reads as %+v, %v", b, got, got.Format(), again, err)
		}
	})
}

func FuzzParseElectionPlan(f *testing.F) {
	for _, s := range []string{
		"{\"partitions\":\n\t[{\"topic\": \"foo\", \"partition\": 1},\n\t {\"topic\": \"foobar\", \"partition\": 2}]\n}",
		`{"partitions":[]}`, `{"partitions":[{"topic":"a","partition":1},{"topic":"a","partition":1}]}`, `{"version":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseElectionPlan(b)
		if err != nil {
			checkParseError(t, b, err)
			return
		}
		again, err := ParseElectionPlan(got.Format())
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("%q: %+v formats as %s, which reads as %+v, %v", b, got, got.Format(), again, err)
		}
	})
}
