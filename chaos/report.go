package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluicemq/sluice/report"
)

// A run's directory, as WriteReport leaves it:
//
//	history.jsonl     every event (the Recorder's, already there)
//	summary.json      Summary, indented
//	checks/<kind>.txt one line per anomaly of that kind (Result.Anomalies)
//	checks/outages.txt one line per outage (Result.Outages)
//	timeline.html     the run drawn over time (see timelineSections)

// Report file names inside a run's directory.
const (
	HistoryFile  = "history.jsonl"
	SummaryFile  = "summary.json"
	ChecksDir    = "checks"
	OutagesFile  = "outages.txt"
	TimelineFile = "timeline.html"
)

// Timeline binning: about this many bins over the run, each at least minBin wide.
const (
	timelineBins = 600
	minBin       = 100 * time.Millisecond
	// maxLatency bounds the spectrum's histogram (a send acknowledged later than this, past any
	// delivery timeout, is counted at it).
	maxLatency = time.Hour
)

// WriteReport writes a run's directory beside its history.jsonl (already there): summary.json,
// checks/<kind>.txt listing each anomaly of that kind, and timeline.html (acknowledged writes
// per second and produce latency p50/p99 over time, from the history's sends, each fault drawn
// as a labelled band from injection to heal; the acks=all latency distribution; the run's
// settings, the Sluice version and the machine at the top), through package report.
//
// It takes s.Result as data (nil for a run that ended before its check: then there are no
// checks and the page says so). Each file is written whole or not at all (a temporary file
// renamed), and every file is attempted: the error joins every failure.
func WriteReport(dir string, s Summary) error {
	var errs []error
	if err := writeSummary(dir, s); err != nil {
		errs = append(errs, err)
	}
	if s.Result != nil {
		if err := writeChecks(filepath.Join(dir, ChecksDir), s.Result); err != nil {
			errs = append(errs, err)
		}
	}
	if err := writeTimeline(dir, s); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func writeSummary(dir string, s Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("chaos: %s: %w", SummaryFile, err)
	}
	return writeFileAtomic(filepath.Join(dir, SummaryFile), append(b, '\n'))
}

// writeChecks writes one file per anomaly kind found (its anomalies, in the checker's order)
// and the outages.
func writeChecks(dir string, r *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	byKind := map[string]*strings.Builder{}
	var kinds []string
	for _, a := range r.Anomalies {
		b, ok := byKind[a.Kind]
		if !ok {
			b = &strings.Builder{}
			byKind[a.Kind] = b
			kinds = append(kinds, a.Kind)
		}
		b.WriteString(anomalyLine(a))
		b.WriteByte('\n')
	}
	var errs []error
	for _, k := range kinds {
		if err := writeFileAtomic(filepath.Join(dir, kindFileName(k)+".txt"), []byte(byKind[k].String())); err != nil {
			errs = append(errs, err)
		}
	}
	var b strings.Builder
	for _, o := range r.Outages {
		fmt.Fprintf(&b, "%s-%d %s to %s: %s without an acknowledged write (%s)\n", o.Topic, o.Partition, fmtSeconds(o.Start), fmtSeconds(o.End), fmtSeconds(o.Duration()), faultName(o))
	}
	if err := writeFileAtomic(filepath.Join(dir, OutagesFile), []byte(b.String())); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// anomalyLine is one anomaly on one line: "chaos-0/3 offset 17 value 2:41: detail".
func anomalyLine(a Anomaly) string {
	line := fmt.Sprintf("%s/%d offset %d", a.Topic, a.Partition, a.Offset)
	if a.Value != "" {
		line += " value " + a.Value
	}
	if a.Detail != "" {
		line += ": " + a.Detail
	}
	// A detail quoting a record (an unexpected value) may hold a newline; one line per anomaly.
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(line)
}

// kindFileName is a kind as a file name: letters, digits, '-' and '_' kept, anything else '_',
// so that no kind names a path outside checks/.
func kindFileName(kind string) string {
	if kind == "" {
		return "unknown"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, kind)
}

func faultName(o Outage) string {
	if o.Fault == "" || o.Fault == "none" {
		return "no fault"
	}
	return fmt.Sprintf("%s, fault %d", o.Fault, o.FaultID)
}

func fmtSeconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + " s" }

// writeFileAtomic writes b to path through a temporary file in its directory, renamed over it.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644) // CreateTemp's 0600 would hide a report from the other users
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("chaos: writing %s: %w", path, err)
	}
	return nil
}

// writeTimeline draws timeline.html from the history in dir.
func writeTimeline(dir string, s Summary) error {
	f, err := os.Open(filepath.Join(dir, HistoryFile))
	if err != nil {
		return fmt.Errorf("chaos: timeline: %w", err)
	}
	defer f.Close()
	tl := newTimeline()
	if err := ReadHistory(f, tl.add); err != nil {
		return fmt.Errorf("chaos: timeline: %w", err)
	}
	page := timelinePage(s, tl, report.DetectMachine(dir))
	var b strings.Builder
	if err := report.Write(&b, page); err != nil {
		return fmt.Errorf("chaos: timeline: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, TimelineFile), []byte(b.String()))
}

// timeline is what the page draws of a history: every send's completion time, outcome and
// latency, and the faults. Sends are kept as a few bytes each (a long run's million sends are
// megabytes), binned once the run's length is known.
type timeline struct {
	sends  []sendPoint
	faults map[int]*FaultRecord // by ID, from EvFault and EvHeal
	order  []int                // fault IDs in injection order
	end    int64                // the last event's time
	hist   *hdrhistogram.Histogram
}

type sendPoint struct {
	t       int64 // completion, ns since the start
	latency int64 // ns; OK sends only
	ok      bool
}

func newTimeline() *timeline {
	return &timeline{faults: map[int]*FaultRecord{}, hist: hdrhistogram.New(1, maxLatency.Microseconds(), 3)}
}

func (tl *timeline) add(e Event) error {
	tl.end = max(tl.end, e.T)
	switch e.Type {
	case EvSend:
		p := sendPoint{t: e.T, ok: e.Outcome == OK}
		if p.ok {
			p.latency = max(e.T-e.Start, 0)
			us := min(max(time.Duration(p.latency).Microseconds(), 1), maxLatency.Microseconds())
			_ = tl.hist.RecordValue(us) // within the bounds
		}
		tl.sends = append(tl.sends, p)
	case EvFault:
		if _, ok := tl.faults[e.ID]; !ok {
			tl.order = append(tl.order, e.ID)
		}
		tl.faults[e.ID] = &FaultRecord{ID: e.ID, Kind: e.Fault, Targets: e.Targets, Start: time.Duration(e.T), End: -1, Detail: e.Detail}
	case EvHeal:
		if f, ok := tl.faults[e.ID]; ok {
			f.End = time.Duration(e.T)
		}
	}
	return nil
}

// binWidth is about 1/timelineBins of the run, in whole multiples of minBin.
func binWidth(run time.Duration) time.Duration {
	w := run / timelineBins
	return max(minBin, (w+minBin-1)/minBin*minBin)
}

// binned are the per-bin series: acknowledged and failed sends per second, and the OK sends'
// latency p50 and p99 in ms (NaN for a bin without one).
type binned struct {
	acked, failed, p50, p99 []report.Point
}

func (tl *timeline) bin(run time.Duration) binned {
	width := binWidth(run)
	n := int((run + width - 1) / width)
	n = max(n, 1)
	acked, failed := make([]int, n), make([]int, n)
	lat := make([][]int64, n)
	for _, s := range tl.sends {
		i := min(max(int(time.Duration(s.t)/width), 0), n-1)
		if s.ok {
			acked[i]++
			lat[i] = append(lat[i], s.latency)
		} else {
			failed[i]++
		}
	}
	var out binned
	for i := range n {
		start := time.Duration(i) * width
		w := min(width, run-start) // the last bin may be short
		if w <= 0 {
			w = width
		}
		t := (start + w/2).Seconds()
		out.acked = append(out.acked, report.Point{T: t, V: float64(acked[i]) / w.Seconds()})
		out.failed = append(out.failed, report.Point{T: t, V: float64(failed[i]) / w.Seconds()})
		p50, p99 := math.NaN(), math.NaN()
		if l := lat[i]; len(l) > 0 {
			slices.Sort(l)
			p50, p99 = ms(nearestRank(l, 0.50)), ms(nearestRank(l, 0.99))
		}
		out.p50 = append(out.p50, report.Point{T: t, V: p50})
		out.p99 = append(out.p99, report.Point{T: t, V: p99})
	}
	return out
}

// nearestRank is the q quantile of sorted values (nearest rank, as HdrHistogram reads one).
func nearestRank(sorted []int64, q float64) int64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// faultRecords are the run's faults: the summary's, or, where it has none, the history's (a
// fault not healed lasts to the end of the run).
func (tl *timeline) faultRecords(s Summary, run time.Duration) []FaultRecord {
	if len(s.Injected) > 0 {
		return s.Injected
	}
	out := make([]FaultRecord, 0, len(tl.order))
	for _, id := range tl.order {
		f := *tl.faults[id]
		if f.End < f.Start {
			f.End = run
		}
		out = append(out, f)
	}
	return out
}

// timelinePage is the page of a run: the verdict and the settings at the top, then the checks,
// the acknowledged writes over time, latency over time beside its distribution, the outages.
func timelinePage(s Summary, tl *timeline, m report.Machine) report.Page {
	run := max(s.Elapsed, time.Duration(tl.end))
	if run <= 0 {
		run = time.Second
	}
	verdict := s.Verdict
	if verdict == "" {
		verdict = "no verdict: the run ended before its check"
	}
	page := report.Page{
		Title:    "sluice chaos run",
		Version:  s.Version,
		Verdict:  verdict,
		Failed:   !s.Passed,
		Settings: summarySettings(s),
		Machine:  m,
	}
	if !s.StartedAt.IsZero() {
		page.Title += " of " + s.StartedAt.UTC().Format(time.RFC3339)
	}
	faults := tl.faultRecords(s, run)
	bands := make([]report.Band, 0, len(faults))
	for _, f := range faults {
		label := f.Kind
		if len(f.Targets) > 0 {
			label += " " + targetsText(f.Targets)
		}
		end := f.End
		if end < f.Start {
			end = run
		}
		bands = append(bands, report.Band{Start: f.Start.Seconds(), End: end.Seconds(), Kind: f.Kind, Label: label, Detail: f.Detail})
	}
	b := tl.bin(run)
	xmax := run.Seconds()
	width := binWidth(run)
	page.Sections = append(page.Sections, report.Section{Heading: "Checks", Table: checksTable(s.Result)})
	page.Sections = append(page.Sections, report.Section{
		Heading: "Writes per second",
		Text:    fmt.Sprintf("Sends completed per %s, acknowledged (acks=all) and failed (the client gave up: the value may or may not be in the log); each fault shaded from its injection to its heal.", width),
		Charts: []report.Chart{report.TimeChart{Title: "writes per second", YLabel: "sends/s", XMax: xmax, Bands: bands, Series: []report.Series{
			{Name: "acknowledged/s", Color: report.Palette[0], Points: b.acked},
			{Name: "failed/s", Color: report.Palette[1], Points: b.failed},
		}}},
	})
	page.Sections = append(page.Sections, report.Section{
		Heading: "Produce latency: p99 (solid) and p50 (dashed) per interval; the distribution over the run",
		Text:    "Acknowledged sends only, from the send to its acknowledgement.",
		Charts: []report.Chart{
			report.TimeChart{Title: "produce latency per interval", YLabel: "latency ms (log)", LogY: true, XMax: xmax, Bands: bands, Series: []report.Series{
				{Name: "p99", Color: report.Palette[0], Points: b.p99},
				{Name: "p50", Color: report.Palette[0], Dashed: true, Points: b.p50},
			}},
			report.SpectrumChart{Title: "acks=all latency distribution", YLabel: "latency ms", Series: []report.SpectrumSeries{
				{Name: "acknowledged", Color: report.Palette[0], Points: report.Spectrum(tl.hist, 1e-3)},
			}},
		},
	})
	if len(s.Failures) > 0 {
		t := &report.Table{Columns: []report.Column{{Name: "harness failure"}}}
		for _, f := range s.Failures {
			t.Rows = append(t.Rows, []report.Cell{{Text: f, Bad: true}})
		}
		page.Sections = append(page.Sections, report.Section{Heading: "Harness failures", Text: "Promises the harness saw broken beside the checker's anomalies; any fails the run.", Table: t})
	}
	if s.Result != nil {
		page.Sections = append(page.Sections, report.Section{
			Heading: "Outages",
			Text:    "The longest time without an acknowledged write, per fault kind in force when it began (checks/outages.txt lists each).",
			Table:   outageTable(s.Result),
		})
	}
	page.Sections = append(page.Sections, report.Section{Heading: "Faults", Table: faultTable(faults)})
	return page
}

// summarySettings are the run's settings: what replays it and what it drove.
func summarySettings(s Summary) []report.Setting {
	w := s.Workload
	set := []report.Setting{
		{Key: "seed", Value: strconv.FormatUint(s.Seed, 10)},
		{Key: "brokers", Value: strconv.Itoa(s.Brokers)},
		{Key: "faults", Value: strings.Join(s.Faults, ", ")},
		{Key: "interval", Value: s.Interval.String()},
		{Key: "duration", Value: s.Duration.String() + " (elapsed " + s.Elapsed.Round(time.Millisecond).String() + ")"},
		{Key: "workload", Value: fmt.Sprintf("%d writers at %d records/s, %d readers (reread every %s)", w.Writers, w.Rate, w.Readers, time.Duration(w.RereadInterval))},
		{Key: "record size", Value: strconv.Itoa(w.RecordSize) + " B"},
		{Key: "group consumers", Value: groupSetting(w)},
		{Key: "acks", Value: fmt.Sprintf("all, enable.idempotence %t, max.in.flight %d, delivery.timeout %s", w.Idempotent(), w.MaxInFlight, time.Duration(w.DeliveryTimeout))},
		{Key: "partitions", Value: fmt.Sprintf("%d topics × %d", w.Topics, w.Partitions)},
		{Key: "replication factor", Value: fmt.Sprintf("%d, min.insync.replicas %d", w.ReplicationFactor, w.MinInsyncReplicas)},
		{Key: "transport", Value: "tcp, through the fault proxy"},
	}
	if s.Command != "" {
		set = append(set, report.Setting{Key: "replay", Value: s.Command})
	}
	return set
}

// groupSetting describes the group consumers.
func groupSetting(w Workload) string {
	if w.Groups() == 0 {
		return "none"
	}
	return fmt.Sprintf("%d in group %s, %s, commit after processing, a crash every %s each (on average)", w.Groups(), GroupID, w.GroupAssignor, time.Duration(w.GroupCrashInterval))
}

// checksTable is each check's count (the lists are in checks/<kind>.txt).
func checksTable(r *Result) *report.Table {
	if r == nil {
		return nil
	}
	t := &report.Table{Columns: []report.Column{{Name: "check"}, {Name: "count"}, {Name: "listed in"}}}
	row := func(name, kind string, n int, bad bool) {
		c := report.Cell{Text: strconv.Itoa(n), Bad: bad && n > 0}
		file := ""
		if n > 0 && kind != "" {
			file = ChecksDir + "/" + kindFileName(kind) + ".txt"
		}
		t.Rows = append(t.Rows, []report.Cell{{Text: name}, c, {Text: file}})
	}
	row("sends", "", r.Sends, false)
	row("acknowledged", "", r.Acknowledged, false)
	row("failed (indeterminate)", "", r.Failed, false)
	row("failed, found in the log", "", r.FailedFound, false)
	row("records read", "", r.Reads, false)
	row("faults", "", r.Faults, false)
	row("lost", "lost", r.Lost, true)
	row("duplicated", "duplicated", r.Duplicated, r.Options.Idempotent)
	row("inconsistent", "inconsistent", r.Inconsistent, true)
	row("non-monotonic", "non-monotonic", r.NonMonotonic, r.Options.Ordered)
	row("unexpected", "unexpected", r.Unexpected, true)
	row("consumer skips", "skip", r.Skips, true)
	row("consumer backward jumps", "backward", r.Backward, true)
	row("commit regressions", "commit-regression", r.CommitRegress, true)
	if r.GroupDelivered > 0 || r.GroupMissed+r.GroupGaps+r.GroupRepeats+r.GroupUnowned > 0 {
		row("records delivered to the group", "", r.GroupDelivered, false)
		row("of them redelivered (after a crash or a lost partition)", "", r.Redelivered, false)
		row("group consumer crashes", "", r.GroupCrashes, false)
		row("acknowledged, committed, never delivered to the group", "group-missed", r.GroupMissed, true)
		row("group gaps (offsets skipped past a commit)", "group-gap", r.GroupGaps, true)
		row("group repeats (committed records delivered again)", "group-repeat", r.GroupRepeats, true)
		row("deliveries of partitions not owned", "group-unowned", r.GroupUnowned, true)
	}
	row("divergent replicas", "divergent", r.Divergent, true)
	row("incomplete final reads", "incomplete", r.Incomplete, true)
	return t
}

// outageTable is the longest outage per fault kind, with how many outages each kind saw.
func outageTable(r *Result) *report.Table {
	t := &report.Table{Columns: []report.Column{{Name: "fault in force"}, {Name: "longest s"}, {Name: "from s"}, {Name: "to s"}, {Name: "fault id"}, {Name: "outages"}}}
	counts := map[string]int{}
	for _, o := range r.Outages {
		counts[outageKind(o)]++
	}
	kinds := make([]string, 0, len(r.LongestByFault))
	for k := range r.LongestByFault {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		return r.LongestByFault[kinds[i]].Duration() > r.LongestByFault[kinds[j]].Duration()
	})
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
	for _, k := range kinds {
		o := r.LongestByFault[k]
		id := ""
		if o.FaultID != 0 {
			id = strconv.Itoa(o.FaultID)
		}
		t.Rows = append(t.Rows, []report.Cell{{Text: k}, {Text: secs(o.Duration())}, {Text: secs(o.Start)}, {Text: secs(o.End)}, {Text: id}, {Text: strconv.Itoa(counts[k])}})
	}
	if len(kinds) == 0 {
		t.Rows = append(t.Rows, []report.Cell{{Text: "none"}, {}, {}, {}, {}, {Text: "0"}})
	}
	return t
}

func outageKind(o Outage) string {
	if o.Fault == "" {
		return "none"
	}
	return o.Fault
}

// faultTable lists every fault with its span.
func faultTable(faults []FaultRecord) *report.Table {
	if len(faults) == 0 {
		return nil
	}
	t := &report.Table{Columns: []report.Column{{Name: "id"}, {Name: "kind"}, {Name: "targets"}, {Name: "from s"}, {Name: "to s"}, {Name: "detail"}}}
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
	for _, f := range faults {
		t.Rows = append(t.Rows, []report.Cell{{Text: strconv.Itoa(f.ID)}, {Text: f.Kind}, {Text: targetsText(f.Targets)}, {Text: secs(f.Start)}, {Text: secs(f.End)}, {Text: f.Detail}})
	}
	return t
}

// targetsText names brokers: "n1 n3".
func targetsText(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = "n" + strconv.Itoa(int(id))
	}
	return strings.Join(parts, " ")
}
