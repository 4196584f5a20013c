package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/bench"
	"github.com/spf13/pflag"
)

// runBench runs `sluice bench args...` in process and returns stdout and stderr.
func runBench(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := rootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"bench"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

// benchJSON runs a bench command with --json and decodes the one object it prints.
func benchJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, errOut, err := runBench(t, append(args, "--json")...)
	if err != nil {
		t.Fatalf("sluice bench %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("stdout %q: %v", out, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("stdout holds more than one JSON object: %q", out)
	}
	return m
}

func checkRun(t *testing.T, m map[string]any, mode string, records float64) {
	t.Helper()
	if m["mode"] != mode || m["errors"].(float64) != 0 {
		t.Errorf("mode %v errors %v (%v), want %s and 0", m["mode"], m["errors"], m["first_error"], mode)
	}
	if records > 0 && m["records"].(float64) != records {
		t.Errorf("records %v, want %v", m["records"], records)
	}
	for _, k := range []string{"bytes", "seconds", "records_per_sec", "mb_per_sec", "rss_peak_mb", "heap_inuse_mb"} {
		if v, _ := m[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want > 0", k, m[k])
		}
	}
	if _, ok := m["latency_ms"].(map[string]any)["p999"]; !ok {
		t.Errorf("latency_ms: %v", m["latency_ms"])
	}
}

func TestBenchProduceSmoke(t *testing.T) {
	m := benchJSON(t, "produce", "--embedded", "--data-dir", t.TempDir(), "--records", "3000", "--record-size", "100", "--payload", "text", "--compression", "lz4")
	checkRun(t, m, "produce", 3000)
	if m["driver"] != "sluice-tcp" {
		t.Errorf("driver %v", m["driver"])
	}
	// Without --json the summary goes to stdout.
	out, _, err := runBench(t, "produce", "--embedded", "--transport", "unix", "--data-dir", t.TempDir(), "--records", "1000", "--record-size", "64", "--rate", "20000")
	if err != nil || !strings.Contains(out, "sluice-unix produce: 1000 records") || !strings.Contains(out, "p99.9") {
		t.Errorf("summary %q, %v", out, err)
	}
}

func TestBenchConsumeSmoke(t *testing.T) {
	dir := t.TempDir()
	prof, tr, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "run.trace"), filepath.Join(dir, "mem.prof")
	m := benchJSON(t, "consume", "--embedded", "--data-dir", t.TempDir(), "--records", "3000", "--record-size", "100",
		"--fetch-size", "65536", "--cpuprofile", prof, "--trace", tr, "--memprofile", mem)
	checkRun(t, m, "consume", 3000)
	if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
		t.Errorf("CPU profile: %v, %v", fi, err)
	}
	if b, err := os.ReadFile(mem); err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) { // a gzipped pprof profile
		t.Errorf("allocation profile: %d bytes, %v", len(b), err)
	}
	if b, err := os.ReadFile(tr); err != nil || !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Errorf("execution trace: %d bytes, %v", len(b), err)
	}
}

func TestBenchE2ESmoke(t *testing.T) {
	report := filepath.Join(t.TempDir(), "e2e.html")
	m := benchJSON(t, "e2e", "--embedded", "--transport", "unix", "--data-dir", t.TempDir(), "--rate", "2000", "--duration", "400ms", "--warmup", "100ms", "--record-size", "64",
		"--report", report)
	checkRun(t, m, "e2e", 0)
	if tl, _ := m["timeline"].([]any); len(tl) == 0 {
		t.Errorf("no timeline in the JSON result: %v", m["timeline"])
	}
	// Throughput, latency over time and its distribution; the run's settings and the machine.
	page, err := os.ReadFile(report)
	if err != nil || bytes.Count(page, []byte("<svg")) != 3 || !bytes.Contains(page, []byte("sluice-unix")) {
		t.Errorf("HTML report: %d bytes, %v", len(page), err)
	}
	for _, want := range []string{"<th>transport</th><td>unix</td>", "<th>record size</th><td>64 B", "<th>mode</th><td>e2e</td>", "<th>cores</th>", "<th>sluice</th><td>sluice "} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("HTML report lacks %s", want)
		}
	}
	if s, _ := m["latency_spectrum"].([]any); len(s) == 0 {
		t.Errorf("no latency spectrum in the JSON result")
	}
	if n := m["records"].(float64); n < 700 || n > 801 {
		t.Errorf("records %v, want about 800", n)
	}
}

// The e2e searches in these tests probe for 500 ms: a probe is sustained only if its records
// arrive within 3 % of its length, and the last one waits out a 5 ms linger, which on a
// loaded machine under -race a 100 ms probe (3 ms) never allows at the low rates.
func TestBenchE2ERateOfMax(t *testing.T) {
	m := benchJSON(t, "e2e", "--embedded", "--transport", "unix", "--data-dir", t.TempDir(), "--rate-of-max", "0.5", "--probe", "500ms",
		"--duration", "300ms", "--record-size", "64", "--pause", "0")
	checkRun(t, m, "e2e", 0)
	maxRate, _ := m["max_rate"].(float64)
	target, _ := m["target_rate"].(float64)
	if maxRate <= 0 || math.Abs(target-maxRate/2) > 1 {
		t.Errorf("max_rate %v, target_rate %v: want a probed maximum and half of it", m["max_rate"], m["target_rate"])
	}
	if _, _, err := runBench(t, "e2e", "--embedded", "--data-dir", t.TempDir(), "--rate", "100", "--rate-of-max", "0.5", "--duration", "100ms"); err == nil {
		t.Error("--rate and --rate-of-max together: want an error")
	}
}

func TestBenchRunsReportsMedians(t *testing.T) {
	m := benchJSON(t, "produce", "--embedded", "--transport", "unix", "--data-dir", t.TempDir(), "--records", "2000", "--record-size", "64", "--runs", "3", "--pause", "10ms")
	checkRun(t, m, "produce", 2000)
	runs, _ := m["runs"].([]any)
	if len(runs) != 3 {
		t.Fatalf("runs %v, want 3", m["runs"])
	}
	var rates []float64
	for i, r := range runs {
		run := r.(map[string]any)
		rates = append(rates, run["records_per_sec"].(float64))
		if run["records"].(float64) != 2000 || run["name"] != "run "+string(rune('1'+i)) {
			t.Errorf("run %d: records %v, name %v", i+1, run["records"], run["name"])
		}
	}
	slices.Sort(rates)
	if m["records_per_sec"].(float64) != rates[1] {
		t.Errorf("records_per_sec %v, want the median of %v", m["records_per_sec"], rates)
	}
	spread, _ := m["spread"].(map[string]any)["records_per_sec"].([]any)
	if len(spread) != 2 || spread[0].(float64) != rates[0] || spread[1].(float64) != rates[2] {
		t.Errorf("spread %v, want [%v %v]", spread, rates[0], rates[2])
	}
	if _, _, err := runBench(t, "produce", "--embedded", "--records", "1", "--runs", "0"); err == nil {
		t.Error("--runs 0: want an error")
	}
}

func TestBenchLimitsSmoke(t *testing.T) {
	m := benchJSON(t, "limits", "--dir", t.TempDir(), "--probe-duration", "20ms", "--max-bytes", "8388608", "--file-size", "1048576")
	for _, k := range []string{"tcp_stream_gbps", "unix_stream_gbps", "sendfile_tcp_gbps", "sendfile_unix_gbps", "disk_write_gbps", "fdatasync_1mib_gbps"} {
		if v, _ := m[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want > 0", k, m[k])
		}
	}
}

func TestBenchRunWorkloadSmoke(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(file, []byte("name: smoke\nmessageSize: 200\npayload: text\nrecords: 2000\nacks: all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := benchJSON(t, "run", file, "--embedded", "--data-dir", dir)
	checkRun(t, m, "produce", 2000)
	if m["name"] != "smoke" {
		t.Errorf("name %v", m["name"])
	}
	if _, _, err := runBench(t, "run", filepath.Join(dir, "missing.yaml"), "--embedded"); err == nil {
		t.Error("missing workload file: want an error")
	}
	// Refused before a broker starts: an empty file, a second document (whose keys would be
	// ignored), fewer producers than topics.
	for name, c := range map[string]struct{ yaml, want string }{
		"empty.yaml":  {"", "empty workload file"},
		"two.yaml":    {"name: a\nmessageSize: 10\nrecords: 10\n---\nname: b\nnosuchkey: 1\n", "more than one YAML document"},
		"topics.yaml": {"name: t\nmessageSize: 10\nrecords: 10\ntopics: 2\n", "at least one per topic"},
	} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runBench(t, "run", f, "--embedded", "--data-dir", dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestBenchCompareSluiceOnly(t *testing.T) {
	saved := embeddedPeers // the peers may be registered; this test compares Sluice alone
	embeddedPeers = map[string]func(context.Context, string) (bench.Driver, error){}
	defer func() { embeddedPeers = saved }()
	m := benchJSON(t, "compare", "--data-dir", t.TempDir(), "--records", "2000", "--record-size", "100")
	rows, _ := m["results"].([]any)
	if len(rows) != 2 {
		t.Fatalf("results %v, want sluice-tcp and sluice-unix", m["results"])
	}
	for i, want := range []string{"sluice-tcp", "sluice-unix"} {
		row := rows[i].(map[string]any)
		if row["system"] != want || row["error"] != nil || row["ratio"].(float64) <= 0 {
			t.Errorf("row %d: %v", i, row)
		}
	}
	if rows[0].(map[string]any)["ratio"].(float64) != 1 {
		t.Errorf("baseline ratio %v, want 1", rows[0].(map[string]any)["ratio"])
	}
	out, _, err := runBench(t, "compare", "--data-dir", t.TempDir(), "--records", "500", "--record-size", "16", "--mode", "produce")
	if err != nil || !strings.Contains(out, "sluice-unix") || !strings.Contains(out, "1.00x") {
		t.Errorf("table %q, %v", out, err)
	}

	// --mode consume fills each system's topic, then reads it back; the table has no latency.
	m = benchJSON(t, "compare", "--mode", "consume", "--data-dir", t.TempDir(), "--records", "3000", "--record-size", "100")
	rows, _ = m["results"].([]any)
	if len(rows) != 2 {
		t.Fatalf("consume results %v, want sluice-tcp and sluice-unix", m["results"])
	}
	for i, r := range rows {
		row := r.(map[string]any)
		res, _ := row["result"].(map[string]any)
		if row["error"] != nil || res["mode"] != "consume" || res["records"].(float64) != 3000 || res["bytes"].(float64) != 300000 || row["ratio"].(float64) <= 0 {
			t.Errorf("consume row %d: %v", i, row)
		}
	}
	out, errOut, err := runBench(t, "compare", "--mode", "consume", "--data-dir", t.TempDir(), "--records", "200", "--record-size", "16")
	if err != nil || !strings.Contains(errOut, "filled bench: ") || !regexp.MustCompile(`sluice-unix +\d+ +[\d.]+ +- `).MatchString(out) {
		t.Errorf("consume table %q, %v: want the fills reported and no p99", out, err)
	}

	m = benchJSON(t, "compare", "--data-dir", t.TempDir(), "--records", "500", "--record-size", "16", "--runs", "2", "--pause", "10ms")
	if all, _ := m["runs"].([]any); len(all) != 2 || len(all[0].([]any)) != 2 {
		t.Fatalf("runs %v: want 2 runs of 2 systems", m["runs"])
	}
	if rows, _ := m["results"].([]any); len(rows) != 2 || rows[0].(map[string]any)["ratio"].(float64) != 1 {
		t.Errorf("median rows %v", m["results"])
	}
}

func TestBenchBadArguments(t *testing.T) {
	// These name the flag they refuse.
	for _, c := range []struct{ args []string }{
		{[]string{"produce", "--embedded", "--acks", "2", "--records", "1"}},
		{[]string{"produce", "--embedded", "--rate", "-1", "--records", "1"}},
		{[]string{"e2e", "--embedded", "--rate", "NaN", "--records", "1"}},
	} {
		flag := c.args[2]
		if _, _, err := runBench(t, c.args...); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("sluice bench %s: %v, want an error naming %s", strings.Join(c.args, " "), err, flag)
		}
	}
	for _, args := range [][]string{
		{"produce", "--embedded", "--driver", "nope", "--records", "1"},
		{"produce", "--embedded", "--transport", "udp", "--records", "1"},
		{"e2e", "--embedded", "--record-size", "8", "--records", "1"},
		{"compare", "--mode", "fetch", "--records", "1"},
		{"compare", "--mode", "consume", "--records", "1", "--rate", "10"},
		{"consume", "--embedded", "--records", "1", "--rate-of-max", "0.5"},
		{"consume", "--embedded", "--records", "1", "--fetch-size", "-1"},
		{"produce", "--broker-process", "--records", "1"},
		{"produce", "--embedded", "--broker-process", "--driver", "kafka", "--records", "1"},
	} {
		if _, _, err := runBench(t, args...); err == nil {
			t.Errorf("sluice bench %s: want an error", strings.Join(args, " "))
		}
	}
}

// TestBenchLimitsNextToRuns: --limits probes what bounds each run before it and reports the
// run's throughput against each probe.
func TestBenchLimitsNextToRuns(t *testing.T) {
	probes := func(t *testing.T, v any) map[string]float64 {
		t.Helper()
		got := map[string]float64{}
		list, _ := v.([]any)
		for _, b := range list {
			m := b.(map[string]any)
			gbps, ratio := m["gbps"].(float64), m["ratio"].(float64)
			if gbps <= 0 || ratio <= 0 {
				t.Errorf("bound %v: want a positive figure and ratio", m)
			}
			got[m["probe"].(string)] = ratio
		}
		return got
	}
	limitFlags := []string{"--limits", "--limits-duration", "20ms", "--pause", "10ms"}

	m := benchJSON(t, append([]string{"produce", "--embedded", "--transport", "unix", "--data-dir", t.TempDir(), "--records", "2000", "--record-size", "64", "--runs", "2"}, limitFlags...)...)
	checkRun(t, m, "produce", 2000)
	for i, r := range m["runs"].([]any) {
		run := r.(map[string]any)
		got := probes(t, run["limits"])
		if len(got) != 2 || got["unix_stream_gbps"] == 0 || got["disk_write_gbps"] == 0 {
			t.Errorf("run %d: bounds %v, want the unix stream and the disk write", i+1, run["limits"])
		}
		for _, b := range run["limits"].([]any) {
			bm := b.(map[string]any)
			if want := run["mb_per_sec"].(float64) / 1e3 / bm["gbps"].(float64); math.Abs(bm["ratio"].(float64)-want) > 1e-9 {
				t.Errorf("run %d: %v ratio %v, want %v", i+1, bm["probe"], bm["ratio"], want)
			}
		}
	}
	if got := probes(t, m["limits"]); len(got) != 2 {
		t.Errorf("medians: bounds %v", m["limits"])
	}
	if _, ok := m["spread"].(map[string]any)["limits.disk_write_gbps.ratio"]; !ok {
		t.Errorf("spread %v: want the disk ratio's", m["spread"])
	}

	m = benchJSON(t, append([]string{"consume", "--embedded", "--data-dir", t.TempDir(), "--records", "2000", "--record-size", "64", "--acks", "all"}, limitFlags...)...)
	if got := probes(t, m["limits"]); len(got) != 1 || got["sendfile_tcp_gbps"] == 0 {
		t.Errorf("consume over TCP: bounds %v, want sendfile over TCP", m["limits"])
	}

	saved := embeddedPeers
	embeddedPeers = map[string]func(context.Context, string) (bench.Driver, error){}
	defer func() { embeddedPeers = saved }()
	m = benchJSON(t, append([]string{"compare", "--data-dir", t.TempDir(), "--records", "1000", "--record-size", "64", "--acks", "all"}, limitFlags...)...)
	rows, _ := m["results"].([]any)
	if len(rows) != 2 {
		t.Fatalf("results %v", m["results"])
	}
	for i, want := range []string{"tcp_stream_gbps", "unix_stream_gbps"} {
		got := probes(t, rows[i].(map[string]any)["result"].(map[string]any)["limits"])
		if len(got) != 2 || got[want] == 0 || got["fdatasync_1mib_gbps"] == 0 {
			t.Errorf("row %d: bounds %v, want %s and fdatasync (acks=all)", i, got, want)
		}
	}

	if _, _, err := runBench(t, append([]string{"e2e", "--embedded", "--data-dir", t.TempDir(), "--rate", "100", "--duration", "100ms"}, limitFlags...)...); err == nil {
		t.Error("e2e --limits: want an error (nothing bounds a run at a set rate)")
	}

	// At a fraction of its maximum, a run's limits are its probed maximum's: produce's
	// probes, and the maximum's MB/s against each.
	m = benchJSON(t, append([]string{"e2e", "--embedded", "--transport", "unix", "--data-dir", t.TempDir(), "--record-size", "64",
		"--rate-of-max", "0.5", "--probe", "500ms", "--duration", "100ms", "--warmup", "0s"}, limitFlags...)...)
	got := probes(t, m["limits"])
	if len(got) != 2 || got["unix_stream_gbps"] == 0 || got["disk_write_gbps"] == 0 || m["limits_of_max"] != true {
		t.Fatalf("e2e --rate-of-max --limits: bounds %v (of the maximum: %v), want the unix stream's and the disk's, of the maximum", m["limits"], m["limits_of_max"])
	}
	maxMB := m["max_rate"].(float64) * m["bytes"].(float64) / m["records"].(float64) / 1e6
	for _, b := range m["limits"].([]any) {
		bm := b.(map[string]any)
		if want := maxMB / 1e3 / bm["gbps"].(float64); math.Abs(bm["ratio"].(float64)-want) > 1e-9 {
			t.Errorf("%v ratio %v, want the maximum's %v", bm["probe"], bm["ratio"], want)
		}
	}

	// So does a workload file's producerRateOfMax (its probes last as long as its run).
	wfile := filepath.Join(t.TempDir(), "max.yaml")
	if err := os.WriteFile(wfile, []byte("name: half\nmessageSize: 64\nconsumers: 1\nproducerRateOfMax: 0.5\nduration: 500ms\nwarmup: 0s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m = benchJSON(t, append([]string{"run", wfile, "--embedded", "--data-dir", t.TempDir()}, limitFlags...)...)
	if got := probes(t, m["limits"]); got["tcp_stream_gbps"] == 0 || got["disk_write_gbps"] == 0 || m["limits_of_max"] != true {
		t.Errorf("run FILE with producerRateOfMax: bounds %v (of the maximum: %v), want the TCP stream's and the disk write's, of the maximum", got, m["limits_of_max"])
	}

	// compare does the same for each system: an e2e comparison at half of each one's maximum
	// gets each maximum's bounds, its own transport's.
	m = benchJSON(t, append([]string{"compare", "--mode", "e2e", "--data-dir", t.TempDir(), "--record-size", "64",
		"--rate-of-max", "0.5", "--probe", "500ms", "--duration", "100ms", "--warmup", "0s"}, limitFlags...)...)
	rows, _ = m["results"].([]any)
	if len(rows) != 2 {
		t.Fatalf("compare results %v", m["results"])
	}
	for i, want := range []string{"tcp_stream_gbps", "unix_stream_gbps"} {
		res := rows[i].(map[string]any)["result"].(map[string]any)
		got := probes(t, res["limits"])
		if got[want] == 0 || got["disk_write_gbps"] == 0 || res["limits_of_max"] != true {
			t.Errorf("compare row %d: bounds %v (of the maximum: %v), want %s and the disk write's, of the maximum", i, got, res["limits_of_max"], want)
		}
	}
}

// --broker-config applies a properties file to the embedded broker (here a message.max.bytes
// below the run's batches: every record is refused), in process and in a broker process, and
// refuses a file with an unknown property or a system it cannot configure.
func TestBenchBrokerConfig(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.properties")
	if err := os.WriteFile(small, []byte("message.max.bytes=1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := benchJSON(t, "produce", "--embedded", "--data-dir", dir, "--broker-config", small, "--records", "50", "--record-size", "2000")
	if errs, _ := m["errors"].(float64); errs != 50 || !strings.Contains(fmt.Sprint(m["first_error"]), "MESSAGE_TOO_LARGE") {
		t.Errorf("errors %v (%v): want all 50 records refused by message.max.bytes=1000", m["errors"], m["first_error"])
	}
	m = benchJSON(t, "produce", "--embedded", "--data-dir", dir, "--records", "50", "--record-size", "2000")
	if errs, _ := m["errors"].(float64); errs != 0 {
		t.Errorf("without --broker-config: %v errors", errs)
	}
	bad := filepath.Join(dir, "bad.properties")
	if err := os.WriteFile(bad, []byte("no.such.property=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runBench(t, "produce", "--embedded", "--data-dir", dir, "--broker-config", bad, "--records", "10"); err == nil || !strings.Contains(err.Error(), "no.such.property") {
		t.Errorf("an unknown property: %v", err)
	}
	if _, _, err := runBench(t, "produce", "--broker-config", small, "--records", "10"); err == nil {
		t.Error("--broker-config without --embedded: want an error")
	}

	// compare applies it to each of its Sluice brokers (the peers have their own settings).
	saved := embeddedPeers
	embeddedPeers = map[string]func(context.Context, string) (bench.Driver, error){}
	defer func() { embeddedPeers = saved }()
	m = benchJSON(t, "compare", "--mode", "produce", "--data-dir", dir, "--broker-config", small, "--records", "50", "--record-size", "2000")
	rows, _ := m["results"].([]any)
	if len(rows) != 2 {
		t.Fatalf("compare results %v, want sluice-tcp and sluice-unix", m["results"])
	}
	for _, row := range rows {
		r := row.(map[string]any)
		res, _ := r["result"].(map[string]any)
		if errs, _ := res["errors"].(float64); errs != 50 || !strings.Contains(fmt.Sprint(res["first_error"]), "MESSAGE_TOO_LARGE") {
			t.Errorf("compare row %v: errors %v (%v), want all 50 records refused by message.max.bytes=1000", r["system"], res["errors"], res["first_error"])
		}
	}
}

// checkBenchFlags parses `sluice bench args...` and runs the subcommand's flag checks
// (PreRunE), without running anything.
func checkBenchFlags(t *testing.T, args ...string) error {
	t.Helper()
	cmd, rest, err := rootCmd().Find(append([]string{"bench"}, args...))
	if err != nil {
		t.Fatalf("bench %s: %v", strings.Join(args, " "), err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if cmd.PreRunE == nil {
		return errors.New("no flag checks")
	}
	return cmd.PreRunE(cmd, cmd.Flags().Args())
}

// Flags a run would ignore, or replace by a default, are refused, naming the flag; the
// combinations the documentation shows are accepted.
func TestBenchFlagChecks(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string // "": accepted
	}{
		{[]string{"produce", "--transport", "unix"}, "--transport"},
		{[]string{"produce", "--broker", "127.0.0.1:1", "--transport", "tcp"}, "--transport"},
		{[]string{"run", "w.yaml", "--transport", "unix"}, "--transport"},
		{[]string{"produce", "--embedded", "--broker", "127.0.0.1:1"}, "--broker"},
		{[]string{"consume", "--embedded", "--broker", "unix:///tmp/s.sock"}, "--broker"},
		{[]string{"produce", "--embedded", "--records", "10", "--duration", "1s"}, "--duration"},
		{[]string{"compare", "--records", "10", "--duration", "1s"}, "--records"},
		{[]string{"produce", "--embedded", "--limits-duration", "1s"}, "--limits-duration"},
		{[]string{"compare", "--limits-duration", "1s"}, "--limits-duration"},
		{[]string{"produce", "--embedded", "--limits", "--limits-duration", "0s"}, "--limits-duration"},
		{[]string{"produce", "--embedded", "--shared-memory=false"}, "--shared-memory"},
		{[]string{"produce", "--embedded", "--transport", "tcp", "--shared-memory=false"}, "--shared-memory"},
		{[]string{"produce", "--broker", "127.0.0.1:1", "--shared-memory=false"}, "--shared-memory"},
		{[]string{"produce", "--embedded", "--record-size", "0"}, "--record-size"},
		{[]string{"e2e", "--embedded", "--record-size", "-1"}, "--record-size"},
		{[]string{"compare", "--record-size", "0"}, "--record-size"},
		{[]string{"produce", "--embedded", "--producers", "-2"}, "--producers"},
		{[]string{"e2e", "--embedded", "--producers", "0"}, "--producers"},
		{[]string{"produce", "--embedded", "--partitions", "-1"}, "--partitions"},
		{[]string{"consume", "--embedded", "--partitions", "0"}, "--partitions"},
		{[]string{"e2e", "--embedded", "--rate-of-max", "0"}, "--rate-of-max"},
		{[]string{"produce", "--embedded", "--rate-of-max", "-0.5"}, "--rate-of-max"},
		{[]string{"compare", "--rate-of-max", "1.5"}, "--rate-of-max"},
		{[]string{"limits", "--probe-duration", "-1s"}, "--probe-duration"},
		{[]string{"limits", "--probe-duration", "0s"}, "--probe-duration"},
		{[]string{"limits", "--max-bytes", "-5"}, "--max-bytes"},
		{[]string{"limits", "--file-size", "0"}, "--file-size"},
		{[]string{"produce", "--embedded", "--probe", "1s"}, "--probe"},
		{[]string{"e2e", "--embedded", "--rate-of-max", "0.5", "--probe", "0s"}, "--probe"},
		{[]string{"produce", "--embedded", "--batch-size", "0"}, "--batch-size"},
		{[]string{"produce", "--embedded", "--linger-ms", "-1"}, "--linger-ms"},
		{[]string{"consume", "--embedded", "--idle-timeout", "0s"}, "--idle-timeout"},
		{[]string{"produce", "--broker", "127.0.0.1:1", "--data-dir", "/tmp"}, "--data-dir"},
		{[]string{"produce", "--embedded", "--driver", "kfake", "--transport", "unix"}, "--transport"},
		{[]string{"compare", "--workload", "w.yaml", "--records", "10"}, "--workload"},
		{[]string{"compare", "--workload", "w.yaml", "--mode", "consume"}, "--workload"},
		{[]string{"produce", "--embedded", "--payload", "text", "--payload-file", "p.bin"}, "--payload"},
		{[]string{"compare", "--payload", "random", "--payload-file", "p.bin"}, "--payload"},
		{[]string{"produce", "--embedded", "--payload", "file", "--payload-file", "p.bin"}, ""},
		{[]string{"produce", "--embedded", "--payload-file", "p.bin"}, ""},
		{[]string{"consume", "--embedded", "--warmup", "1s"}, "--warmup"},
		{[]string{"consume", "--broker", "127.0.0.1:1", "--warmup", "1s"}, "--warmup"},
		{[]string{"produce", "--embedded", "--warmup", "1s"}, ""},

		{[]string{"produce", "--embedded", "--transport", "unix", "--records", "10", "--shared-memory=false"}, ""},
		{[]string{"produce", "--broker", "unix:///tmp/s.sock", "--shared-memory=false"}, ""},
		{[]string{"compare", "--shared-memory=false", "--duration", "1s"}, ""},
		{[]string{"produce", "--broker", "127.0.0.1:1", "--records", "10"}, ""},
		{[]string{"e2e", "--embedded", "--transport", "unix", "--rate-of-max", "1", "--limits", "--limits-duration", "20ms"}, ""},
		{[]string{"run", "w.yaml", "--embedded", "--transport", "unix"}, ""},
		{[]string{"limits", "--probe-duration", "20ms", "--max-bytes", "8388608", "--file-size", "1048576"}, ""},
		{[]string{"produce", "--broker", "127.0.0.1:1", "--limits", "--data-dir", "/tmp"}, ""},
		{[]string{"e2e", "--embedded", "--rate-of-max", "0.5", "--probe", "500ms", "--linger-ms", "0"}, ""},
		{[]string{"compare", "--workload", "w.yaml", "--runs", "3"}, ""},
	} {
		err := checkBenchFlags(t, c.args...)
		switch {
		case c.flag == "" && err != nil:
			t.Errorf("bench %s: %v", strings.Join(c.args, " "), err)
		case c.flag != "" && (err == nil || !strings.Contains(err.Error(), c.flag)):
			t.Errorf("bench %s: error %v, want one naming %s", strings.Join(c.args, " "), err, c.flag)
		}
	}
	// The checks run before anything starts.
	if _, _, err := runBench(t, "produce", "--embedded", "--data-dir", t.TempDir(), "--records", "1", "--record-size", "0"); err == nil || !strings.Contains(err.Error(), "--record-size") {
		t.Errorf("bench produce --record-size 0: %v", err)
	}
}

// An explicit --records 0 (or a negative count) is refused, naming the flag and saying what
// leaving it out does, rather than taken as no count: a produce run would then go on for the
// default --duration. A consume run without --records reads everything there is, and one on
// a fresh broker (--embedded, compare) first fills the topic.
func TestBenchRecordsNotPositive(t *testing.T) {
	const (
		duration = "--records 0: want at least 1 record, or leave it out to run for --duration"
		fill     = "--records 0: want at least 1 record, or leave it out to fill the topic with 100000 records and read them all"
	)
	for _, c := range []struct {
		args []string
		want string // "": accepted
	}{
		{[]string{"produce", "--embedded", "--records", "0"}, duration},
		{[]string{"produce", "--broker", "127.0.0.1:1", "--records", "-3"}, "--records -3: want at least 1 record, or leave it out to run for --duration"},
		{[]string{"e2e", "--embedded", "--records", "0"}, duration},
		{[]string{"compare", "--records", "0"}, duration},
		{[]string{"compare", "--mode", "e2e", "--records", "0"}, duration},
		{[]string{"compare", "--mode", "consume", "--records", "0"}, fill},
		{[]string{"consume", "--embedded", "--records", "0"}, fill},
		{[]string{"consume", "--broker", "127.0.0.1:1", "--records", "0"}, "--records 0: want at least 1 record, or leave it out to read every record there is (until none arrives for --idle-timeout)"},
		{[]string{"produce", "--embedded", "--records", "1"}, ""},
		{[]string{"consume", "--broker", "127.0.0.1:1", "--records", "1"}, ""},
		{[]string{"compare", "--mode", "consume", "--records", "1"}, ""},
	} {
		err := checkBenchFlags(t, c.args...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("bench %s: %v", strings.Join(c.args, " "), err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("bench %s: error %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// TestBenchHelpNoBoolPlaceholder: pflag takes a back-quoted word in a flag's usage as the
// name of its value, so a bool flag whose usage quotes a command would read in --help as if
// it took an argument ("--limits bench limits").
func TestBenchHelpNoBoolPlaceholder(t *testing.T) {
	root := rootCmd()
	b, _, err := root.Find([]string{"bench"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range b.Commands() {
		for _, fs := range []*pflag.FlagSet{sub.Flags(), sub.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if name, _ := pflag.UnquoteUsage(f); f.Value.Type() == "bool" && name != "" {
					t.Errorf("bench %s --%s: --help shows a value %q for a bool flag", sub.Name(), f.Name, name)
				}
			})
		}
	}
}
