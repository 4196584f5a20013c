package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
)

// group describe shows each committed partition's offset, log end and lag; reset-offsets
// prints its plan, and commits it only with --execute, clamped to the log's range with a
// warning, as kafka-consumer-groups does; like it, it refuses to shift an offset the group
// never committed.
func TestGroupDescribeAndResetOffsets(t *testing.T) {
	e := newConsumeEnv(t)
	e.topic("grp", 2)
	e.produce("grp", 0, 1_000_000, "a", "b", "c") // offsets 0-2 at 1,000 s
	e.produce("grp", 0, 2_000_000, "d", "e")      // offsets 3-4 at 2,000 s
	e.produce("grp", 1, 1_000_000, "x")
	run := func(args ...string) (stdout, stderr string, err error) { return e.runCmd(groupCmd(), args...) }
	fields := func(out string) [][]string {
		var rows [][]string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			rows = append(rows, strings.Fields(line))
		}
		return rows
	}
	// partitions: the rows of describe's table of partitions (its last), without the columns
	// of the owner (a group of one-off consumers has none: '-').
	partitions := func(out string) [][]string {
		sections := strings.Split(strings.TrimSpace(out), "\n\n")
		rows := fields(sections[len(sections)-1])
		for i, r := range rows {
			if len(r) == 9 && strings.Join(r[6:], " ") == "- - -" {
				rows[i] = r[:6]
			}
		}
		return rows
	}
	same := func(got [][]string, want ...string) bool {
		if len(got) != len(want) {
			return false
		}
		for i, w := range want {
			if strings.Join(got[i], " ") != w {
				return false
			}
		}
		return true
	}

	if out, _, err := run("describe", "grp-readers"); err == nil || !strings.Contains(err.Error(), "consumer group grp-readers does not exist") {
		t.Fatalf("a group with no commits and no members: %q %v; want an error saying it does not exist", out, err)
	}
	if out, _, err := run("list"); err != nil || out != "" {
		t.Fatalf("group list before any commit: %q, %v; want nothing", out, err)
	}
	// The group reads 2 records of partition 0 and commits (consume --group commits on exit).
	consumeOut := e.run("--topic", "grp", "--partition", "0", "--group", "grp-readers", "--from-beginning", "--max-messages", "2")
	if consumeOut != "a\nb\n" {
		t.Fatalf("consume: %q", consumeOut)
	}
	if out, _, err := run("list"); err != nil || !same(fields(out), "grp-readers - Empty") {
		t.Fatalf("group list: %q, %v; want grp-readers, Empty, with no protocol type", out, err)
	}
	out, _, err := run("describe", "grp-readers")
	if err != nil || !strings.HasPrefix(out, "GROUP") || !same(fields(strings.Split(out, "\n\n")[0]), "grp-readers - - Empty 0") || !same(partitions(out), "grp-readers grp 0 2 5 3") {
		t.Fatalf("describe after 2 of 5 records: %q, %v; want offset 2, end 5, lag 3", out, err)
	}

	for _, tc := range []struct {
		args []string
		want []string // rows: group topic partition new-offset
		// warn: what stderr says besides the dry run (a partition moved other than asked),
		// one line each; none: it says nothing else.
		warn []string
	}{
		{[]string{"--to-earliest"}, []string{"grp-readers grp 0 0", "grp-readers grp 1 0"}, nil},
		{[]string{"--to-latest"}, []string{"grp-readers grp 0 5", "grp-readers grp 1 1"}, nil},
		{[]string{"--to-datetime", "1500000"}, []string{"grp-readers grp 0 3", "grp-readers grp 1 1"}, // none at or after: the end
			[]string{"Warn: grp-1 has no record at or after 1500000: the log end 1 instead"}},
		{[]string{"--to-datetime", "1970-01-01T00:16:40Z", "--partition", "0"}, []string{"grp-readers grp 0 0"}, nil},
		{[]string{"--to-offset", "4"}, []string{"grp-readers grp 0 4", "grp-readers grp 1 1"}, // clamped to the end
			[]string{"Warn: new offset 4 of grp-1 is past the log end: 1 instead"}},
		{[]string{"--shift-by", "-1", "--partition", "0"}, []string{"grp-readers grp 0 1"}, nil},
		{[]string{"--shift-by", "-5", "--partition", "0"}, []string{"grp-readers grp 0 0"},
			[]string{"Warn: new offset -3 of grp-0 is below the log start: 0 instead"}},
		{[]string{"--shift-by", "10", "--partition", "0"}, []string{"grp-readers grp 0 5"},
			[]string{"Warn: new offset 12 of grp-0 is past the log end: 5 instead"}},
	} {
		args := append([]string{"reset-offsets", "grp-readers", "--topic", "grp"}, tc.args...)
		out, errOut, err := run(args...)
		want := strings.Join(append(tc.warn, "Dry run: nothing was committed. Add --execute to commit these offsets.\n"), "\n")
		if err != nil || !same(fields(out), tc.want...) || errOut != want {
			t.Errorf("%v: %q %q %v; want rows %q and stderr %q", tc.args, out, errOut, err, tc.want, want)
		}
	}
	// The dry runs committed nothing.
	if out, _, err := run("describe", "grp-readers"); err != nil || !same(partitions(out), "grp-readers grp 0 2 5 3") {
		t.Fatalf("describe after the dry runs: %q, %v", out, err)
	}
	if _, errOut, err := run("reset-offsets", "grp-readers", "--topic", "grp", "--partition", "0", "--to-offset", "1", "--execute"); err != nil || strings.Contains(errOut, "Dry run") {
		t.Fatalf("reset --execute: %q %v", errOut, err)
	}
	if out, _, err := run("describe", "grp-readers", "--topic", "grp"); err != nil || !same(partitions(out), "grp-readers grp 0 1 5 4") {
		t.Fatalf("describe after the reset: %q, %v; want offset 1, lag 4", out, err)
	}
	// The group's next consumer starts at the reset offset.
	if got := e.run("--topic", "grp", "--partition", "0", "--group", "grp-readers", "--max-messages", "1"); got != "b\n" {
		t.Fatalf("the group's consumer after the reset: %q, want b", got)
	}
	a, err := client.NewAdmin(e.ctx, e.b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got, err := a.ListGroupOffsets(e.ctx, "grp-readers"); err != nil || len(got) != 1 || got[client.TopicPartition{Topic: "grp"}] != 2 {
		t.Fatalf("committed after the consumer: %v, %v", got, err)
	}

	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"reset-offsets", "g", "--to-earliest"}, "--topic is required"},
		{[]string{"reset-offsets", "g", "--topic", "grp"}, "give exactly one of"},
		{[]string{"reset-offsets", "g", "--topic", "grp", "--to-earliest", "--to-latest"}, "give exactly one of"},
		{[]string{"reset-offsets", "g", "--topic", "grp", "--to-offset", "-3"}, "--to-offset -3"},
		{[]string{"reset-offsets", "g", "--topic", "grp", "--to-datetime", "soon"}, `--to-datetime "soon": want milliseconds since 1970 or an RFC 3339 time`},
		// An empty time is no time (it used to move every partition to the log's start), nor
		// is a name of a log's end (--to-earliest and --to-latest say those).
		{[]string{"reset-offsets", "g", "--topic", "grp", "--to-datetime", ""}, `--to-datetime "": want milliseconds since 1970`},
		{[]string{"reset-offsets", "g", "--topic", "grp", "--to-datetime", "latest"}, `--to-datetime "latest": want milliseconds since 1970`},
		{[]string{"reset-offsets", "g", "--topic", "grp", "--to-datetime", "-2"}, `--to-datetime "-2": want milliseconds since 1970`},
		// Kafka refuses to shift where nothing is committed: there is nothing to shift from
		// (the group's consumers would start by auto.offset.reset), and taking the log's start
		// instead would commit offsets the group never had.
		{[]string{"reset-offsets", "grp-readers", "--topic", "grp", "--shift-by", "-1"}, "--shift-by: group grp-readers has no committed offset to shift in topic grp partition 1: move those with"},
		{[]string{"reset-offsets", "g", "--topic", "grp", "--shift-by", "1", "--execute"}, "--shift-by: group g has no committed offset to shift in topic grp partitions 0,1: move those with"},
		{[]string{"reset-offsets", "g", "--topic", "grp", "--partition", "2", "--to-earliest"}, "--partition 2: topic grp has partitions 0 to 1"},
		{[]string{"reset-offsets", "g", "--topic", "absent", "--to-earliest"}, "UNKNOWN_TOPIC_OR_PARTITION"},
	} {
		if _, _, err := run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.wantErr)
		}
	}
	if got, err := a.ListGroupOffsets(e.ctx, "g"); err != nil || len(got) != 0 {
		t.Fatalf("the refused resets committed %v (%v)", got, err)
	}
}

// runCmd runs cmd (a command group of the CLI, such as topicCmd()) with args and the env's
// broker, and returns its stdout and stderr.
func (e *consumeEnv) runCmd(cmd *cobra.Command, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append(args, "--broker", e.b.Addr().String()))
	err = cmd.ExecuteContext(e.ctx)
	return out.String(), errOut.String(), err
}
