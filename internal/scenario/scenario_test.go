package scenario

import (
	"slices"
	"strings"
	"testing"
)

func TestParseAndFormat(t *testing.T) {
	const script = "# a comment\nfirst a=1\n----\nok\n\nsecond\n----\nline 1\nline 2\n"
	blocks, err := Parse(script)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Comments: []string{"# a comment"}, Cmd: "first a=1", Want: []string{"ok"}},
		{Cmd: "second", Want: []string{"line 1", "line 2"}},
	}
	if len(blocks) != len(want) {
		t.Fatalf("%d blocks, want %d: %+v", len(blocks), len(want), blocks)
	}
	for i := range want {
		if blocks[i].Cmd != want[i].Cmd || !slices.Equal(blocks[i].Comments, want[i].Comments) || !slices.Equal(blocks[i].Want, want[i].Want) {
			t.Errorf("block %d: %+v, want %+v", i, blocks[i], want[i])
		}
	}
	// Formatting with the expected output gives the script back.
	if got := Format(blocks, [][]string{blocks[0].Want, blocks[1].Want}); got != script {
		t.Errorf("Format: %q, want %q", got, script)
	}
}

func TestParseRefusesACommandWithoutSeparator(t *testing.T) {
	for _, script := range []string{"cmd\nok\n", "first\n----\nok\n\nsecond"} {
		if _, err := Parse(script); err == nil || !strings.Contains(err.Error(), "is not followed by ----") {
			t.Errorf("%q: %v, want the missing separator named", script, err)
		}
	}
}
