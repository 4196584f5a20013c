// Package scenario runs the scenario scripts that test the project's state machines step by step
// (cluster/ and replication/ testdata/scenarios), in the spirit of cockroachdb's datadriven, which
// the module proxy here does not serve.
//
// A script is a sequence of blocks: one command line, a line "----", and the expected output up
// to a blank line; lines starting with '#' between blocks are comments. What a command means is
// the test's: Run hands each command line to it and compares the lines it returns with the
// block's. With rewrite set, the actual output is written back into the script instead, to be
// reviewed in the diff; comments and commands are kept as they were.
package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Block is one command of a script with the comments before it and its expected output.
type Block struct {
	Comments []string
	Cmd      string
	Want     []string
}

// Parse splits a script into its blocks. A command line not followed by "----" is an error
// naming its line.
func Parse(text string) ([]Block, error) {
	var blocks []Block
	var comments []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			continue
		case strings.HasPrefix(l, "#"):
			comments = append(comments, l)
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			return nil, fmt.Errorf("line %d: %q is not followed by ----", i+1, l)
		}
		b := Block{Comments: comments, Cmd: l}
		comments = nil
		for i += 2; i < len(lines) && lines[i] != ""; i++ {
			b.Want = append(b.Want, lines[i])
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// Format is the script text of blocks, each with got[i] as its output.
func Format(blocks []Block, got [][]string) string {
	var out strings.Builder
	for i, b := range blocks {
		if i > 0 {
			out.WriteString("\n")
		}
		for _, c := range b.Comments {
			out.WriteString(c + "\n")
		}
		out.WriteString(b.Cmd + "\n----\n")
		for _, l := range got[i] {
			out.WriteString(l + "\n")
		}
	}
	return out.String()
}

// Run runs every script matching glob as a subtest named after its file. For each, start returns
// the function that runs one command line (on a fresh state for that script) and returns its
// output lines.
func Run(t *testing.T, glob string, rewrite bool, start func(t *testing.T, file string) func(cmd string) []string) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios match %s: %v", glob, err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)), func(t *testing.T) {
			text, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			blocks, err := Parse(string(text))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			run := start(t, file)
			got := make([][]string, len(blocks))
			for i, b := range blocks {
				got[i] = run(b.Cmd)
				if !rewrite && !slices.Equal(got[i], b.Want) {
					t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", file, b.Cmd, strings.Join(got[i], "\n"), strings.Join(b.Want, "\n"))
				}
			}
			if rewrite {
				if err := os.WriteFile(file, []byte(Format(blocks, got)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
