package retry

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestBackoffDoublesToItsCapAndResets(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 5 * time.Second}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays %v, want %v", got, want)
		}
	}
	b.Reset()
	if d := b.Next(); d != time.Second {
		t.Fatalf("after Reset: %v, want the minimum", d)
	}
}

// An episode of failures logs two lines however many attempts fail: the first failure with its
// error, and the success that ends it with the count.
func TestEpisodeLogsOnceWhenItStartsAndOnceWhenItEnds(t *testing.T) {
	var buf bytes.Buffer
	e := Episode{Logger: slog.New(slog.NewTextHandler(&buf, nil)), What: "recovery point write"}
	now := time.Unix(1000, 0)
	if e.Succeed(now) {
		t.Fatal("Succeed without a failure ended an episode")
	}
	boom := errors.New("too many open files")
	for i := range 10 {
		if logged := e.Fail(now.Add(time.Duration(i)*time.Second), boom); logged != (i == 0) {
			t.Fatalf("failure %d logged: %v", i, logged)
		}
	}
	if failing, n := e.Failing(); !failing || n != 10 {
		t.Fatalf("Failing() = %v, %d; want true, 10", failing, n)
	}
	if !e.Succeed(now.Add(30 * time.Second)) {
		t.Fatal("Succeed after failures did not end the episode")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "recovery point write failed; retrying") || !strings.Contains(lines[0], "too many open files") {
		t.Fatalf("first line: %s", lines[0])
	}
	if !strings.Contains(lines[1], "succeeded again") || !strings.Contains(lines[1], "failed_attempts=10") || !strings.Contains(lines[1], "after=30s") {
		t.Fatalf("second line: %s", lines[1])
	}
	if failing, _ := e.Failing(); failing {
		t.Fatal("still failing after Succeed")
	}
}
