package bench

import (
	"fmt"
	"strings"
)

// Bound is one of the machine's limits, probed next to a run, and the run's throughput
// against it: the ratio a goal "against the physical limit" is stated in. On a shared machine
// the limits move as much as the runs do (on this project's 2-core VM the disk write probe read
// 0.34 to 6.6 GB/s within one week, with the state of the page cache), so a ratio is worth
// quoting only against a probe made next to the run it divides, not against last week's.
type Bound struct {
	Probe string  `json:"probe"` // a Probe constant, the probe's key in LimitsResult
	GBps  float64 `json:"gbps"`  // the probe's figure
	Ratio float64 `json:"ratio"` // the run's record bytes per second over the probe's
}

// String reads "0.95 of sequential write 1.05 GB/s".
func (b Bound) String() string {
	return fmt.Sprintf("%.2f of %s %.2f GB/s", b.Ratio, ProbeTitle(b.Probe), b.GBps)
}

// BoundingProbes returns the probes that bound a run of mode whose client reaches the system
// over transport (TransportTCP or TransportUnix). A produce run moves every byte through the
// socket and into the log: the transport's stream, and the disk (sequential writes; writes
// with an fdatasync per MiB for acks=all, which Sluice acknowledges only once synced). A
// consume run sends the log's pages from the page cache: sendfile over the transport. Nothing
// bounds an e2e run, whose rate is set, not found.
func BoundingProbes(mode, transport string, acks int) []string {
	unixT := transport == TransportUnix
	switch mode {
	case ModeProduce:
		stream, disk := ProbeTCPStream, ProbeDiskWrite
		if unixT {
			stream = ProbeUnixStream
		}
		if acks == -1 {
			disk = ProbeFdatasync
		}
		return []string{stream, disk}
	case ModeConsume:
		if unixT {
			return []string{ProbeSendfileUnix}
		}
		return []string{ProbeSendfileTCP}
	}
	return nil
}

// MaxBoundingProbes are the limits probes that bound the maximum a run at a fraction of it
// finds (Config.RateOfMax): the run's own rate is set, so nothing bounds it, but its flat-out
// probe is bounded as a produce run is (an e2e consumer reads from the page cache what was
// just written).
func MaxBoundingProbes(mode, transport string, acks int) []string {
	if mode == ModeE2E {
		mode = ModeProduce
	}
	return BoundingProbes(mode, transport, acks)
}

// SetBounds records in r its throughput against each of probes, from l (a probe l did not
// run, or that read zero, is left out). For a run at a fraction of its probed maximum
// (MaxRate set) the throughput compared is the maximum's, and LimitsOfMax says so; with no
// bound recorded (no --limits) LimitsOfMax stays false, since it describes ratios that are
// not there.
func (r *Result) SetBounds(l LimitsResult, probes []string) {
	r.Limits, r.LimitsOfMax = nil, false
	mbps, ofMax := r.MBPerSec, false
	if r.MaxRate > 0 && r.Records > 0 {
		mbps, ofMax = r.MaxRate*float64(r.Bytes)/float64(r.Records)/1e6, true
	}
	for _, p := range probes {
		g := l.Get(p)
		if g <= 0 {
			continue
		}
		r.Limits = append(r.Limits, Bound{Probe: p, GBps: g, Ratio: mbps / 1e3 / g})
	}
	r.LimitsOfMax = ofMax && len(r.Limits) > 0
}

// Tightest returns the bound r came nearest to (the highest ratio); ok is false if r has none.
func (r Result) Tightest() (b Bound, ok bool) {
	for _, l := range r.Limits {
		if !ok || l.Ratio > b.Ratio {
			b, ok = l, true
		}
	}
	return b, ok
}

// limitsLine describes r's bounds ("" if none), with each figure's spread where sp gives one.
func (r Result) limitsLine(sp func(key, format string) string) string {
	if len(r.Limits) == 0 {
		return ""
	}
	parts := make([]string, len(r.Limits))
	for i, l := range r.Limits {
		parts[i] = fmt.Sprintf("%.2f%s of %s (%.2f GB/s%s)", l.Ratio, sp(boundKey(l.Probe, "ratio"), "%.2f"),
			ProbeTitle(l.Probe), l.GBps, sp(boundKey(l.Probe, "gbps"), "%.2f"))
	}
	if r.LimitsOfMax {
		return "the probed maximum against the machine's limits: " + strings.Join(parts, ", ")
	}
	return "against the machine's limits: " + strings.Join(parts, ", ")
}

// boundKey is the name of a bound's figure in a Repeated's spread: "limits.disk_write_gbps.ratio".
func boundKey(probe, figure string) string { return "limits." + probe + "." + figure }

// summarizeBounds sets out's bounds to the medians over runs of each probe's figure and ratio,
// with their spreads, over the runs that have it.
func summarizeBounds(out *Repeated, runs []Result) {
	var order []string
	by := map[string][]Bound{}
	for _, r := range runs {
		out.LimitsOfMax = out.LimitsOfMax || r.LimitsOfMax
		for _, l := range r.Limits {
			if _, ok := by[l.Probe]; !ok {
				order = append(order, l.Probe)
			}
			by[l.Probe] = append(by[l.Probe], l)
		}
	}
	for _, p := range order {
		bs := by[p]
		gbps, ratios := make([]float64, len(bs)), make([]float64, len(bs))
		for i, b := range bs {
			gbps[i], ratios[i] = b.GBps, b.Ratio
		}
		g, glo, ghi := medianSpread(gbps)
		q, qlo, qhi := medianSpread(ratios)
		out.Spread[boundKey(p, "gbps")] = [2]float64{glo, ghi}
		out.Spread[boundKey(p, "ratio")] = [2]float64{qlo, qhi}
		out.Limits = append(out.Limits, Bound{Probe: p, GBps: g, Ratio: q})
	}
}
