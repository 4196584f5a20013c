package bench

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBoundingProbes(t *testing.T) {
	for _, tc := range []struct {
		mode, transport string
		acks            int
		want            []string
	}{
		{ModeProduce, TransportTCP, 1, []string{ProbeTCPStream, ProbeDiskWrite}},
		{ModeProduce, TransportUnix, 0, []string{ProbeUnixStream, ProbeDiskWrite}},
		{ModeProduce, TransportUnix, -1, []string{ProbeUnixStream, ProbeFdatasync}},
		{ModeProduce, "", -1, []string{ProbeTCPStream, ProbeFdatasync}},
		{ModeConsume, TransportTCP, 1, []string{ProbeSendfileTCP}},
		{ModeConsume, TransportUnix, -1, []string{ProbeSendfileUnix}},
		{ModeE2E, TransportUnix, 1, nil},
	} {
		if got := BoundingProbes(tc.mode, tc.transport, tc.acks); !slices.Equal(got, tc.want) {
			t.Errorf("%s over %q, acks %d: %v, want %v", tc.mode, tc.transport, tc.acks, got, tc.want)
		}
	}
}

func TestSetBoundsAndTightest(t *testing.T) {
	r := Result{MBPerSec: 800}
	if _, ok := r.Tightest(); ok {
		t.Error("a run without bounds has no tightest one")
	}
	l := LimitsResult{UnixStream: 8, DiskWrite: 1}
	r.SetBounds(l, []string{ProbeUnixStream, ProbeDiskWrite, ProbeSendfileTCP}) // the last did not run
	want := []Bound{{ProbeUnixStream, 8, 0.1}, {ProbeDiskWrite, 1, 0.8}}
	if len(r.Limits) != len(want) {
		t.Fatalf("bounds %+v, want %+v", r.Limits, want)
	}
	for i, b := range r.Limits {
		if b.Probe != want[i].Probe || b.GBps != want[i].GBps || math.Abs(b.Ratio-want[i].Ratio) > 1e-12 {
			t.Errorf("bound %d: %+v, want %+v", i, b, want[i])
		}
	}
	if b, ok := r.Tightest(); !ok || b.Probe != ProbeDiskWrite {
		t.Errorf("tightest %+v, want the disk write (0.8)", b)
	}
	var sum strings.Builder
	r.WriteSummary(&sum)
	if !strings.Contains(sum.String(), "against the machine's limits: 0.10 of unix stream (8.00 GB/s), 0.80 of sequential write (1.00 GB/s)") {
		t.Errorf("summary:\n%s", sum.String())
	}
	r.SetBounds(LimitsResult{}, nil)
	if r.Limits != nil {
		t.Errorf("bounds after setting none: %+v", r.Limits)
	}
}

// A run at a fraction of its maximum is compared by its probed maximum: 200 k records/s of
// 1,000 bytes is 200 MB/s, whatever the run's own (set) rate; the summary says whose ratios
// they are, and so do the medians of repeated runs.
func TestSetBoundsOfTheMaximum(t *testing.T) {
	if got := MaxBoundingProbes(ModeE2E, TransportUnix, 1); !slices.Equal(got, []string{ProbeUnixStream, ProbeDiskWrite}) {
		t.Errorf("e2e's maximum is bounded by %v, want produce's probes", got)
	}
	r := Result{Driver: "d", Mode: ModeE2E, Records: 1000, Bytes: 1_000_000, MBPerSec: 100, MaxRate: 200_000, TargetRate: 100_000}
	r.SetBounds(LimitsResult{DiskWrite: 1}, []string{ProbeDiskWrite})
	if len(r.Limits) != 1 || math.Abs(r.Limits[0].Ratio-0.2) > 1e-12 || !r.LimitsOfMax {
		t.Fatalf("bounds %+v (of the maximum: %v), want 0.2 of the disk, of the maximum", r.Limits, r.LimitsOfMax)
	}
	var sum strings.Builder
	r.WriteSummary(&sum)
	if !strings.Contains(sum.String(), "the probed maximum against the machine's limits: 0.20 of sequential write (1.00 GB/s)") {
		t.Errorf("summary:\n%s", sum.String())
	}
	s := Summarize([]Result{r, r})
	if !s.LimitsOfMax || len(s.Limits) != 1 {
		t.Errorf("medians: bounds %+v, of the maximum %v", s.Limits, s.LimitsOfMax)
	}
	// Without --limits there are no ratios, so none is said to be the maximum's (the JSON
	// has no limits_of_max).
	r.SetBounds(LimitsResult{}, nil)
	if r.LimitsOfMax || len(r.Limits) != 0 {
		t.Errorf("no limits probed: bounds %+v, of the maximum %v, want none and false", r.Limits, r.LimitsOfMax)
	}
	r.MaxRate = 0
	r.SetBounds(LimitsResult{DiskWrite: 1}, []string{ProbeDiskWrite})
	if r.LimitsOfMax || math.Abs(r.Limits[0].Ratio-0.1) > 1e-12 {
		t.Errorf("without a maximum: %+v (of the maximum: %v), want the run's 0.1", r.Limits, r.LimitsOfMax)
	}
}

// TestSummarizeBounds: each probe's figure and ratio get their own median and spread, over the
// runs that have it; the ratio's median is of the runs' own ratios, not a ratio of medians.
func TestSummarizeBounds(t *testing.T) {
	run := func(mbps, disk, unix float64) Result {
		r := Result{Driver: "d", Mode: ModeProduce, MBPerSec: mbps}
		r.SetBounds(LimitsResult{DiskWrite: disk, UnixStream: unix}, []string{ProbeUnixStream, ProbeDiskWrite})
		return r
	}
	// Ratios to the disk: 0.5, 0.9, 0.6 (median 0.6); the disk's median is 1.5, and 1000 MB/s
	// over it would be 0.67.
	s := Summarize([]Result{run(500, 1, 10), run(1800, 2, 9), run(900, 1.5, 0)})
	if len(s.Limits) != 2 || s.Limits[0].Probe != ProbeUnixStream || s.Limits[1].Probe != ProbeDiskWrite {
		t.Fatalf("bounds %+v, want unix stream then disk write", s.Limits)
	}
	disk := s.Limits[1]
	if disk.GBps != 1.5 || math.Abs(disk.Ratio-0.6) > 1e-12 {
		t.Errorf("disk bound %+v, want 1.5 GB/s and the median ratio 0.6", disk)
	}
	if got := s.Spread["limits.disk_write_gbps.ratio"]; math.Abs(got[0]-0.5) > 1e-12 || math.Abs(got[1]-0.9) > 1e-12 {
		t.Errorf("disk ratio spread %v, want [0.5 0.9]", got)
	}
	// The third run's unix probe read 0 (did not run): the unix bound is over two runs.
	if u := s.Limits[0]; u.GBps != 9.5 || math.Abs(u.Ratio-(0.05+0.2)/2) > 1e-12 {
		t.Errorf("unix bound %+v, want the medians of two runs", u)
	}
	var sum strings.Builder
	s.WriteSummary(&sum)
	if !strings.Contains(sum.String(), "0.60 [0.50–0.90] of sequential write (1.50 GB/s [1.00–2.00])") {
		t.Errorf("summary:\n%s", sum.String())
	}
}

func TestCompareTableNearestLimit(t *testing.T) {
	a := Result{RecordsPerSec: 1000, MBPerSec: 1000}
	a.SetBounds(LimitsResult{TCPStream: 4, DiskWrite: 2}, []string{ProbeTCPStream, ProbeDiskWrite})
	rows := []CompareRow{{System: "a", Result: a, Ratio: 1}, {System: "b", Result: Result{RecordsPerSec: 10}, Ratio: 0.01}}
	var out strings.Builder
	WriteCompareTable(&out, rows)
	if !strings.Contains(out.String(), "nearest limit") || !strings.Contains(out.String(), "0.50 of sequential write 2.00 GB/s") {
		t.Errorf("table:\n%s", out.String())
	}
	out.Reset()
	WriteCompareTable(&out, rows[1:])
	if strings.Contains(out.String(), "nearest limit") {
		t.Errorf("a table without bounds has no limit column:\n%s", out.String())
	}
}

func TestLimitsOfRunsOnlyTheProbesNamed(t *testing.T) {
	c := LimitsConfig{Dir: t.TempDir(), Duration: 20 * time.Millisecond, MaxBytes: 8 << 20, FileSize: 1 << 20}
	r, err := LimitsOf(context.Background(), c, ProbeUnixStream, ProbeDiskWrite)
	if err != nil {
		t.Fatal(err)
	}
	if r.UnixStream <= 0 || r.DiskWrite <= 0 {
		t.Errorf("unix stream %v, disk write %v: want both measured", r.UnixStream, r.DiskWrite)
	}
	if r.TCPStream != 0 || r.SendfileTCP != 0 || r.SendfileUnix != 0 || r.Fdatasync1MiB != 0 || r.CRC32CMemory != 0 {
		t.Errorf("probes not asked for ran: %+v", r)
	}
	if _, err := LimitsOf(context.Background(), c, "warp_drive_gbps"); err == nil {
		t.Error("an unknown probe: want an error")
	}
}
