package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"

	"github.com/sluicemq/sluice/report"
)

// Result is the outcome of one run; its JSON form is what `sluice bench --json` prints.
type Result struct {
	Name          string  `json:"name,omitempty"` // workload name
	Driver        string  `json:"driver"`
	Mode          string  `json:"mode"` // produce, consume, e2e
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Errors        int64   `json:"errors"`
	FirstError    string  `json:"first_error,omitempty"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	// TargetRate is the open-loop rate asked for (records/s, all producers); 0 flat out.
	TargetRate float64 `json:"target_rate,omitempty"`
	// MaxRate is the records/s a flat-out probe reached, when TargetRate is a fraction of it
	// (Config.RateOfMax).
	MaxRate float64 `json:"max_rate,omitempty"`
	// LatencyMs: produce, send (scheduled, open-loop) to acknowledgement; e2e, scheduled send
	// to receipt; consume, zero.
	LatencyMs Latency `json:"latency_ms"`
	// LatencySpectrum is LatencyMs's whole distribution, the percentile spectrum in ms
	// (Histogram.Spectrum), which the HTML report draws; consume, none.
	LatencySpectrum []report.Quantile `json:"latency_spectrum,omitempty"`
	// SendLagMs (open-loop runs) is how late the harness itself sent the measured records,
	// after their due times: part of LatencyMs that the system under test did not cause.
	SendLagMs Latency `json:"send_lag_ms,omitzero"`
	// ProduceRequests and Batches are the produce requests the producers wrote and the record
	// batches in them, over the whole run with its warm-up (not the probes of a --rate-of-max
	// run, which come before it), where the driver counts them (RequestCounter).
	ProduceRequests int64 `json:"produce_requests,omitempty"`
	Batches         int64 `json:"batches,omitempty"`
	// SharedRequests counts the ProduceRequests that went through shared memory rather than
	// the socket (SharedRequestCounter).
	SharedRequests int64 `json:"shared_requests,omitempty"`
	// FileReadBytes (consume) counts the bytes the consumers read from the broker's segment
	// files instead of fetching them through the socket (FileReadCounter).
	FileReadBytes int64 `json:"file_read_bytes,omitempty"`
	// LatencyClamped counts latencies above 60 s, recorded as 60 s.
	LatencyClamped int64 `json:"latency_clamped,omitempty"`
	// Unsent (open-loop runs of a duration) counts the measured records that were due in the
	// run but never sent: the producers fell so far behind the schedule that they stopped,
	// the run's duration plus a grace after its start (behindGrace), with these still to
	// send. The rate asked for was not sustained; the throughput is that of the records sent.
	Unsent int64 `json:"unsent,omitempty"`
	// Limits are the machine's limits that bound the run, probed right before it, and the
	// run's throughput against each (SetBounds; none unless asked for).
	Limits []Bound `json:"limits,omitempty"`
	// LimitsOfMax says the ratios in Limits are the probed maximum's (MaxRate), not the run's:
	// a run at a fraction of its maximum has a rate that was set, not found.
	LimitsOfMax bool `json:"limits_of_max,omitempty"`
	// CPUSeconds is the process's CPU time (user and system, every thread: client, harness and
	// any in-process broker or peer; plus a broker process's, BrokerCPUSeconds) over the
	// measured window: from the first measured send
	// (consume: the first records' poll) to the last record (within 5 ms). Zero where the
	// system does not say.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// BrokerCPUSeconds is the part of CPUSeconds spent by a broker in a process of its own
	// (BrokerCPUReader), zero for an in-process or remote broker.
	BrokerCPUSeconds float64 `json:"broker_cpu_seconds,omitempty"`
	// BrokerRSSPeakMB is that broker process's peak RSS (RSSPeakMB is this process's, since
	// the last ReleaseMemory: compare and repeated runs call it before each run).
	// For a cluster of broker processes (ClusterSluice) it is their sum, and
	// BrokerRSSPeakMBEach each one's, in node id order.
	BrokerRSSPeakMB     float64   `json:"broker_rss_peak_mb,omitempty"`
	BrokerRSSPeakMBEach []float64 `json:"broker_rss_peak_mb_each,omitempty"`
	// Cluster is the shape of the cluster the run went against ("3 brokers, RF 3,
	// min.insync.replicas 2"), empty for one broker.
	Cluster string `json:"cluster,omitempty"`
	// FollowerLag is every follower's lag behind its leader over the measured window, sampled
	// every Config.FollowerLagEvery (nil when not asked for).
	FollowerLag *FollowerLag `json:"follower_lag,omitempty"`
	RSSPeakMB   float64      `json:"rss_peak_mb"`
	HeapInuseMB float64      `json:"heap_inuse_mb"`
	// Timeline is the run, interval by interval (warm-up included and marked).
	Timeline []Interval `json:"timeline,omitempty"`
	// Settings are the run's settings (workload, record size, acks, batch, partitions,
	// replication factor, transport, ...) as the HTML report's header lists them.
	Settings []report.Setting `json:"settings,omitempty"`
	// WarmupSeconds is the warm-up's length, from the start of the run (not in the figures).
	WarmupSeconds float64 `json:"warmup_seconds,omitempty"`
}

// finish fills the rates and the memory figures.
func (r *Result) finish(seconds float64) {
	r.Seconds = seconds
	if seconds > 0 {
		r.RecordsPerSec = float64(r.Records) / seconds
		r.MBPerSec = float64(r.Bytes) / seconds / 1e6
	}
	r.RSSPeakMB, r.HeapInuseMB = MemoryMB()
}

// WriteSummary prints r for people.
func (r Result) WriteSummary(w io.Writer) {
	name := r.Driver
	if r.Name != "" {
		name = r.Name + " on " + r.Driver
	}
	if r.Cluster != "" {
		name += " (" + r.Cluster + ")"
	}
	fmt.Fprintf(w, "%s %s: %d records, %.1f MB in %.2f s: %.0f records/s, %.2f MB/s",
		name, r.Mode, r.Records, float64(r.Bytes)/1e6, r.Seconds, r.RecordsPerSec, r.MBPerSec)
	if r.TargetRate > 0 {
		fmt.Fprintf(w, " (target %.0f records/s", r.TargetRate)
		if r.MaxRate > 0 {
			fmt.Fprintf(w, ", %.2f of the probed maximum %.0f", r.TargetRate/r.MaxRate, r.MaxRate)
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
	if r.Unsent > 0 {
		fmt.Fprintf(w, "%s\n", r.unsentText())
	}
	if r.Mode != ModeConsume {
		l := r.LatencyMs
		fmt.Fprintf(w, "latency ms: p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", l.P50, l.P95, l.P99, l.P999, l.Max)
	}
	if l := r.FollowerLag; l != nil && l.Samples == 0 {
		fmt.Fprintln(w, "follower lag: no follower position was read (no follower has fetched at its leader's epoch)")
	} else if l != nil {
		fmt.Fprintf(w, "follower lag (%d samples): records p50 %.0f  p99 %.0f  max %.0f; ms p50 %.3f  p99 %.3f  max %.3f\n",
			l.Samples, l.RecordsP50, l.RecordsP99, l.RecordsMax, l.MsP50, l.MsP99, l.MsMax)
		if l.Errors > 0 {
			fmt.Fprintf(w, "follower lag: %d reads failed (first: %s)\n", l.Errors, l.FirstError)
		}
	}
	if line := r.clampedLine(); line != "" {
		fmt.Fprintln(w, line)
	}
	if l := r.SendLagMs; l != (Latency{}) {
		fmt.Fprintf(w, "harness send lag ms (included above): p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", l.P50, l.P99, l.P999, l.Max)
	}
	if r.Errors > 0 {
		fmt.Fprintf(w, "errors: %d (first: %s)\n", r.Errors, r.FirstError)
	}
	if line := r.requestsLine(); line != "" {
		fmt.Fprintln(w, line+" (the whole run)")
	}
	if line := r.cpuLine(); line != "" {
		fmt.Fprintln(w, line)
	}
	if line := r.limitsLine(func(string, string) string { return "" }); line != "" {
		fmt.Fprintln(w, line+", probed before the run")
	}
	fmt.Fprintf(w, "memory: peak RSS %.1f MB, Go heap in use %.1f MB", r.RSSPeakMB, r.HeapInuseMB)
	switch {
	case len(r.BrokerRSSPeakMBEach) > 1:
		fmt.Fprintf(w, "; broker processes' peak RSS %.1f MB (", r.BrokerRSSPeakMB)
		for i, mb := range r.BrokerRSSPeakMBEach {
			if i > 0 {
				fmt.Fprint(w, " + ")
			}
			fmt.Fprintf(w, "%.1f", mb)
		}
		fmt.Fprint(w, ")")
	case r.BrokerRSSPeakMB > 0:
		fmt.Fprintf(w, "; broker process peak RSS %.1f MB", r.BrokerRSSPeakMB)
	}
	fmt.Fprintln(w)
}

// unsentText says that the run fell behind (Result.Unsent > 0).
func (r Result) unsentText() string { return "fell behind: " + r.unsentDetail() }

// unsentDetail is unsentText after "fell behind: " (ErrFellBehind's text).
func (r Result) unsentDetail() string {
	return fmt.Sprintf("%d records due in the run were never sent; the rate was not sustained", r.Unsent)
}

// clampedLine says how many latencies were above the histograms' 60 s and counted as 60 s, so
// that the max (and any quantile at 60 s) is read as "at least"; "" when none were.
func (r Result) clampedLine() string {
	if r.LatencyClamped <= 0 {
		return ""
	}
	return fmt.Sprintf("latency: %d records took more than 60 s and are counted as 60 s (the max and the quantiles at 60 s are lower bounds)", r.LatencyClamped)
}

// requestsLine tells how the records travelled: produce requests and batches per request.
func (r Result) requestsLine() string {
	if r.FileReadBytes > 0 {
		return fmt.Sprintf("read from the broker's files: %.1f MB (the rest through the socket)", float64(r.FileReadBytes)/1e6)
	}
	if r.ProduceRequests <= 0 {
		return ""
	}
	line := fmt.Sprintf("requests: %d, %.1f batches each", r.ProduceRequests, float64(r.Batches)/float64(r.ProduceRequests))
	if r.SharedRequests > 0 {
		line += fmt.Sprintf(", %d through shared memory", r.SharedRequests)
	}
	return line
}

// cpuLine describes the run's CPU time: in all, as cores kept busy over the measured time, and
// per GB of record values moved (the figure to compare across machines and runs).
func (r Result) cpuLine() string {
	if r.CPUSeconds <= 0 {
		return ""
	}
	line := fmt.Sprintf("cpu: %.2f s", r.CPUSeconds)
	switch {
	case r.BrokerCPUSeconds > 0 && r.Cluster != "":
		line += fmt.Sprintf(" (broker processes %.2f s)", r.BrokerCPUSeconds)
	case r.BrokerCPUSeconds > 0:
		line += fmt.Sprintf(" (broker process %.2f s)", r.BrokerCPUSeconds)
	}
	if r.Seconds > 0 {
		line += fmt.Sprintf(", %.2f cores", r.CPUSeconds/r.Seconds)
	}
	if r.Bytes > 0 {
		line += fmt.Sprintf(", %.2f s per GB", r.CPUSeconds/(float64(r.Bytes)/1e9))
	}
	return line
}

// WriteJSON writes v as one JSON object and a newline.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// MemoryMB returns the process's peak resident set (VmHWM in /proc/self/status; 0 where
// there is none) and the Go heap in use, in MB (10^6 bytes). In-process brokers count.
func MemoryMB() (rssPeak, heapInuse float64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapInuse = float64(ms.HeapInuse) / 1e6
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		rssPeak = float64(parseVmHWM(b)) * 1024 / 1e6
	}
	return rssPeak, heapInuse
}

// parseVmHWM returns the VmHWM line's value in kB, 0 if absent.
func parseVmHWM(status []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
		return kb
	}
	return 0
}
