package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// decodeOne decodes exactly one JSON object from b.
func decodeOne(t *testing.T, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("more than one JSON value in %q", b)
	}
	return m
}

func TestResultJSONShape(t *testing.T) {
	d := newMemDriver()
	r, err := Produce(context.Background(), d, Config{Records: 100, RecordSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	m := decodeOne(t, buf.Bytes())
	for _, k := range []string{"records", "bytes", "seconds", "records_per_sec", "mb_per_sec", "rss_peak_mb", "heap_inuse_mb", "driver", "mode", "errors"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, buf.Bytes())
		}
	}
	lat, ok := m["latency_ms"].(map[string]any)
	if !ok {
		t.Fatalf("latency_ms is %T", m["latency_ms"])
	}
	for _, k := range []string{"p50", "p95", "p99", "p999", "max"} {
		if _, ok := lat[k].(float64); !ok {
			t.Errorf("latency_ms has no number %q", k)
		}
	}
	if m["records"].(float64) != 100 || m["bytes"].(float64) != 1000 {
		t.Errorf("records %v bytes %v", m["records"], m["bytes"])
	}
	// The producer's counts (memProducer: a batch per record, four a request), over every
	// record it sent.
	d.mu.Lock()
	sent := d.mu.sent
	d.mu.Unlock()
	if m["batches"] != float64(sent) || m["produce_requests"] != float64((sent+3)/4) {
		t.Errorf("batches %v, produce_requests %v; the producer sent %d records", m["batches"], m["produce_requests"], sent)
	}
	var sum strings.Builder
	r.WriteSummary(&sum)
	if !strings.Contains(sum.String(), "p99.9") || !strings.Contains(sum.String(), "peak RSS") ||
		!strings.Contains(sum.String(), fmt.Sprintf("requests: %d, 4.0 batches each", (sent+3)/4)) {
		t.Errorf("summary:\n%s", sum.String())
	}
}

func TestLimitsJSONShapeAndTinyRun(t *testing.T) {
	r, err := Limits(context.Background(), LimitsConfig{Dir: t.TempDir(), Duration: 20 * time.Millisecond, MaxBytes: 8 << 20, FileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	m := decodeOne(t, buf.Bytes())
	for _, k := range []string{"tcp_stream_gbps", "unix_stream_gbps", "sendfile_tcp_gbps", "sendfile_unix_gbps", "disk_write_gbps", "fdatasync_1mib_gbps", "crc32c_memory_gbps", "rss_peak_mb", "heap_inuse_mb"} {
		v, ok := m[k].(float64)
		if !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, m[k])
		}
	}
}

func TestParseVmHWM(t *testing.T) {
	status := []byte("Name:\tsluice\nVmPeak:\t  200 kB\nVmHWM:\t   12345 kB\nVmRSS:\t 100 kB\n")
	if got := parseVmHWM(status); got != 12345 {
		t.Errorf("VmHWM %d, want 12345", got)
	}
	if got := parseVmHWM([]byte("Name: x\n")); got != 0 {
		t.Errorf("no VmHWM: %d, want 0", got)
	}
}

func TestPayloads(t *testing.T) {
	text := TextPayload(1 << 16)
	if !bytes.Equal(text, TextPayload(1<<16)) {
		t.Error("text payload is not deterministic")
	}
	lines := bytes.Split(text, []byte("\n"))
	var v map[string]any
	if err := json.Unmarshal(lines[0], &v); err != nil || v["level"] == nil {
		t.Errorf("first line %q: %v", lines[0], err)
	}
	for _, kind := range []string{PayloadRandom, PayloadText} {
		p, err := NewPayload(kind, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		a, b := p.Next(), p.Next()
		if len(a) != 100 || len(b) != 100 || bytes.Equal(a, b) {
			t.Errorf("%s: values of %d and %d bytes, equal %v", kind, len(a), len(b), bytes.Equal(a, b))
		}
	}
	if _, err := NewPayload("zeros", 10, ""); err == nil {
		t.Error("unknown payload kind: want an error")
	}
	if _, err := NewPayload(PayloadFile, 10, ""); err == nil {
		t.Error("file payload without a file: want an error")
	}
}
