package main

import (
	"strings"
	"testing"
)

// topic offsets prints kafka-get-offsets' TOPIC:PARTITION:OFFSET lines for every partition, or
// those asked for, at the --time asked, and refuses what it cannot look up.
func TestTopicOffsets(t *testing.T) {
	e := newConsumeEnv(t)
	e.topic("offs", 3)
	e.produce("offs", 0, 1_000_000, "a", "b") // offsets 0-1 at 1,000 s
	e.produce("offs", 0, 2_000_000, "c")      // offset 2 at 2,000 s
	e.produce("offs", 2, 1_500_000, "d")      // partition 2, offset 0 at 1,500 s
	run := func(args ...string) (string, error) {
		out, _, err := e.runCmd(topicCmd(), append([]string{"offsets"}, args...)...)
		return out, err
	}
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr string
	}{
		{[]string{"offs"}, "offs:0:3\noffs:1:0\noffs:2:1\n", ""},
		{[]string{"offs", "--time", "latest"}, "offs:0:3\noffs:1:0\noffs:2:1\n", ""},
		{[]string{"offs", "--time", "-1"}, "offs:0:3\noffs:1:0\noffs:2:1\n", ""},
		{[]string{"offs", "--time", "earliest"}, "offs:0:0\noffs:1:0\noffs:2:0\n", ""},
		{[]string{"offs", "--time", "-2", "--partition", "2"}, "offs:2:0\n", ""},
		{[]string{"offs", "--time", "max-timestamp", "--partition", "0"}, "offs:0:2\n", ""},
		// The first record at or after the time; none: no offset.
		{[]string{"offs", "--time", "1200000"}, "offs:0:2\noffs:1:\noffs:2:0\n", ""},
		{[]string{"offs", "--time", "1970-01-01T00:25:00Z", "--partition", "0,2"}, "offs:0:2\noffs:2:0\n", ""},
		{[]string{"offs", "--time", "3000000"}, "offs:0:\noffs:1:\noffs:2:\n", ""},
		{[]string{"offs", "--partition", "2", "--partition", "0"}, "offs:0:3\noffs:2:1\n", ""},
		{[]string{"offs", "--partition", "3"}, "", "--partition 3: topic offs has partitions 0 to 2"},
		{[]string{"offs", "--partition", "-1"}, "", "--partition -1: topic offs has partitions 0 to 2"},
		{[]string{"offs", "--time", "soon"}, "", `--time "soon": want latest, earliest, max-timestamp`},
		{[]string{"offs", "--time", "-5"}, "", "--time -5: a time is milliseconds since 1970"},
		{[]string{"absent"}, "", "UNKNOWN_TOPIC_OR_PARTITION"},
	} {
		out, err := run(tc.args...)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || out != tc.want {
			t.Errorf("%v: %q, %v; want %q", tc.args, out, err, tc.want)
		}
	}
}
