package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runChaos runs `sluice chaos args...` in process.
func runChaos(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := rootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"chaos"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestChaosRefusesBadInput: an unknown fault, a seed that is not a number, a workload file
// that does not parse or asks the impossible, and the like are refused with the value named,
// before any process starts (the run's directory is never made).
func TestChaosRefusesBadInput(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sluice chaos runs on Linux only")
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badJSON := write("bad.json", `{"writers": 2,,}`)
	unknownField := write("unknown.json", `{"writerz": 2}`)
	rfTooBig := write("rf.json", `{"replication_factor": 5}`)
	nonEmpty := filepath.Join(dir, "used")
	if err := os.MkdirAll(filepath.Join(nonEmpty, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "run")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--faults", "kill,explode"}, `unknown fault "explode"`},
		{[]string{"--faults", "kil-leader"}, `did you mean "kill-leader"`},
		{[]string{"--faults", ","}, "names no fault"},
		{[]string{"--seed", "forty-two"}, `--seed "forty-two": want an unsigned integer`},
		{[]string{"--seed", "-1"}, `--seed "-1"`},
		{[]string{"--brokers", "0"}, "--brokers 0"},
		{[]string{"--interval", "10ms"}, "--interval 10ms"},
		{[]string{"--duration", "2s", "--interval", "5s"}, "--duration 2s"},
		{[]string{"--property", "node.id=7"}, "--property node.id"},
		{[]string{"--workload", badJSON}, badJSON},
		{[]string{"--workload", unknownField}, "writerz"},
		{[]string{"--workload", rfTooBig}, "5"},
		{[]string{"--workload", filepath.Join(dir, "missing.json")}, "missing.json"},
		{[]string{"--dir", nonEmpty}, "not empty"},
		{[]string{"--rate", "-5"}, "--rate -5"},
		{[]string{"--record-size", "3"}, "3"},
	} {
		args := append([]string{"run", "--dir", runDir}, tc.args...)
		if tc.args[0] == "--dir" {
			args = append([]string{"run"}, tc.args...)
		}
		out, err := runChaos(t, args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("chaos %s: err %v, want it to say %q (output %q)", strings.Join(tc.args, " "), err, tc.want, out)
		}
		if _, err := os.Stat(runDir); err == nil {
			t.Fatalf("chaos %s: made the run's directory before refusing", strings.Join(tc.args, " "))
		}
	}
}

// TestChaosShortRun runs a short `sluice chaos run` of real broker processes (a kill of a
// leader, an isolation, a power cut, a controlled shutdown) and checks that it passes, that
// the verdict line is printed, and that the run's directory holds the history, the summary
// (with every fault and the checker's counts) and the timeline. The CI's chaos tier runs the
// long form; this one guards the harness itself.
func TestChaosShortRun(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("runs real broker processes for about a minute (Linux)")
	}
	bin := buildSluice(t)
	dir := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "chaos", "run", "--dir", dir, "--duration", "16s", "--interval", "4s",
		"--faults", "kill-leader,isolate,power-loss,bounce", "--seed", "3", "--settle", "2s")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) } // stops its brokers
	cmd.WaitDelay = 45 * time.Second
	err := cmd.Run()
	if err != nil {
		t.Fatalf("sluice chaos run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "4 faults in ") || !strings.Contains(out.String(), " 0 lost, ") {
		t.Errorf("no verdict line of 4 faults and 0 lost:\n%s", out.String())
	}
	var s struct {
		Passed   bool
		Injected []struct{ Kind string }
		Result   struct{ Acknowledged, Lost int }
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	if !s.Passed || len(s.Injected) != 4 || s.Result.Acknowledged == 0 || s.Result.Lost != 0 {
		t.Errorf("summary: passed %v, %d faults, %d acknowledged, %d lost", s.Passed, len(s.Injected), s.Result.Acknowledged, s.Result.Lost)
	}
	for _, f := range []string{"history.jsonl", "timeline.html"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestChaosInterruptStopsEverything interrupts a run (SIGINT) once its first fault is in: the
// harness exits non-zero, every broker process it started (the pids it printed, restarts
// included) is gone, and the history written so far is on disk, ending with the interrupt.
func TestChaosInterruptStopsEverything(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("runs real broker processes (Linux)")
	}
	bin := buildSluice(t)
	dir := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(bin, "chaos", "run", "--dir", dir, "--duration", "2m", "--interval", "3s",
		"--faults", "kill-leader,pause", "--seed", "5")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var pids []int
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	interrupted := false
	deadline := time.AfterFunc(3*time.Minute, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		for _, m := range pidPattern.FindAllStringSubmatch(line, -1) {
			for _, f := range strings.Split(m[1], ",") {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
		}
		if !interrupted && strings.Contains(line, "] heal 2:") {
			interrupted = true
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
		}
	}
	go func() { exited <- cmd.Wait() }()
	err = <-exited
	if !interrupted {
		t.Fatalf("the run ended before its second fault healed: %v\n%s%s", err, out.String(), errOut.String())
	}
	if err == nil {
		t.Errorf("an interrupted run exited 0:\n%s", out.String())
	}
	if len(pids) < 3 {
		t.Fatalf("printed %d broker pids, want at least 3:\n%s", len(pids), out.String())
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("broker pid %d still there after the harness exited (kill 0: %v)", pid, err)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 10 || !strings.Contains(lines[len(lines)-1], "interrupted") {
		t.Errorf("history: %d lines, the last %q; want the run so far ending with the interrupt", len(lines), lines[len(lines)-1])
	}
}

// pidPattern finds the broker pids a run prints ("pid 1234", "(pid 1234,1240)").
var pidPattern = regexp.MustCompile(`pid ([0-9,]+)`)
