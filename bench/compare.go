package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"text/tabwriter"
)

// System is one system that Compare runs a workload against. Open starts it (in-process, on
// fresh data) and returns its driver; closing the driver stops it.
type System struct {
	Name string
	// Transport is how its client reaches it, TransportTCP or TransportUnix (which limits
	// bound it: BoundingProbes); empty means TCP.
	Transport string
	Open      func(ctx context.Context) (Driver, error)
}

// CompareRow is one system's outcome. Ratio is its records/s over the first system's (the
// baseline, Sluice over TCP); 0 when either failed.
type CompareRow struct {
	System string  `json:"system"`
	Result Result  `json:"result"`
	Error  string  `json:"error,omitempty"`
	Ratio  float64 `json:"ratio"`
}

// Compare runs the same workload against each system, one after another, so that they never
// compete for the machine, and with the memory the one before left behind released first. A
// system that fails to start or to run gets a row with its error.
func Compare(ctx context.Context, systems []System, run func(ctx context.Context, d Driver) (Result, error), log io.Writer) []CompareRow {
	return CompareFrom(ctx, systems, 0, run, log)
}

// CompareFrom is Compare starting with systems[first] and going round: repeated comparisons
// (--runs) rotate the order, so that no system always runs first on a fresh machine, or always
// right after the same other system (whose page cache and memory it meets). The rows are in
// the systems' order whatever the running order, and each ratio is to systems[0]. If ctx ends,
// the systems that did not run have no row.
func CompareFrom(ctx context.Context, systems []System, first int, run func(ctx context.Context, d Driver) (Result, error), log io.Writer) []CompareRow {
	ran := make([]*CompareRow, len(systems))
	for k := range systems {
		if ctx.Err() != nil {
			break
		}
		i := (first + k) % len(systems)
		s := systems[i]
		if log != nil {
			fmt.Fprintf(log, "== %s\n", s.Name)
		}
		row := CompareRow{System: s.Name}
		ReleaseMemory()
		d, err := s.Open(ctx)
		if err == nil {
			row.Result, err = run(ctx, d)
			if cerr := d.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("close: %w", cerr)
			}
		}
		if err != nil {
			row.Error = err.Error()
			if log != nil {
				fmt.Fprintf(log, "%s: %v\n", s.Name, err)
			}
		} else if log != nil {
			row.Result.WriteSummary(log)
		}
		ran[i] = &row
	}
	rows := make([]CompareRow, 0, len(systems))
	for _, r := range ran {
		if r != nil {
			rows = append(rows, *r)
		}
	}
	if len(ran) > 0 && ran[0] != nil && ran[0].Error == "" && ran[0].Result.RecordsPerSec > 0 {
		base := ran[0].Result.RecordsPerSec
		for i := range rows {
			if rows[i].Error == "" {
				rows[i].Ratio = rows[i].Result.RecordsPerSec / base
			}
		}
	}
	return rows
}

// WriteCompareTable prints the rows as a table. Where the runs were measured against the
// machine's limits (Result.Limits), a last column gives each system's nearest one (its probed
// maximum's, for runs at a fraction of it).
func WriteCompareTable(w io.Writer, rows []CompareRow) {
	bounded, ofMax := false, false
	for _, r := range rows {
		bounded = bounded || len(r.Result.Limits) > 0
		ofMax = ofMax || r.Result.LimitsOfMax
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "system\trecords/s\tMB/s\tp99 ms\tCPU s/GB\tvs first\t"
	switch {
	case ofMax:
		header += "maximum's nearest limit\t"
	case bounded:
		header += "nearest limit\t"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t  error: %s\n", r.System, r.Error)
			continue
		}
		perGB := "-"
		if res := r.Result; res.CPUSeconds > 0 && res.Bytes > 0 {
			perGB = fmt.Sprintf("%.2f", res.CPUSeconds/(float64(res.Bytes)/1e9))
		}
		p99 := "-" // a consume run measures no latency
		if r.Result.Mode != ModeConsume {
			p99 = fmt.Sprintf("%.3f", r.Result.LatencyMs.P99)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%s\t%s\t%.2fx\t", r.System, r.Result.RecordsPerSec, r.Result.MBPerSec, p99, perGB, r.Ratio)
		if bounded {
			limit := "-"
			if b, ok := r.Result.Tightest(); ok {
				limit = b.String()
			}
			fmt.Fprintf(tw, "%s\t", limit)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// RunWorkload runs a workload's run (produce, or e2e with consumers) against d; settle (nil
// for none) is Config.Settle.
func RunWorkload(ctx context.Context, d Driver, w Workload, progress io.Writer, settle func(context.Context) error) (Result, error) {
	c, err := w.Config()
	if err != nil {
		return Result{}, err
	}
	c.Progress, c.Settle = progress, settle
	if w.Mode() == ModeE2E {
		return E2E(ctx, d, c)
	}
	return Produce(ctx, d, c)
}

// ReleaseMemory collects the garbage of whatever ran before in this process and returns the
// freed memory to the system, so that a run does not pay for its predecessor's heap: an
// in-process kfake keeps every record it was sent (2.4 GB of heap after a 1 GB run), and the
// Sluice runs after it in the same compare ran at a third of the first run's throughput. It
// also starts the process's peak RSS again from what is left, so that the next run's peak is
// its own (on Linux; elsewhere there is none).
func ReleaseMemory() {
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
}
