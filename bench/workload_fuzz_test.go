package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseWorkload: a workload file is user input (sluice bench run). ParseWorkload must
// return an error for what it cannot run, never panic; what it accepts must hold the ranges
// Config() checks, give a Config that the run's withDefaults takes, and describe itself.
func FuzzParseWorkload(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("workloads", "*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no example workloads: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])                                                                   // cut short
		f.Add([]byte(strings.Replace(string(b), "duration:", "records: 1000\nduration:", 1))) // both
	}
	for _, s := range []string{
		"name: r\nmessageSize: 10\nrecords: 5\n",
		"name: f\nmessageSize: 10\nduration: 1s\npayload: file\npayloadFile: /dev/null\nacks: all\n",
		"name: x\nmessageSize: 10\nduration: 1s\nlingerMs: -1\nwarmup: 0s\nacks: \"-1\"\n",
		"name: e\nmessageSize: 64\nduration: 1s\nconsumers: 2\ntopics: 2\nproducerRate: 1e3\n",
		"name: i\nmessageSize: 8\nduration: 1s\nproducerRate: .inf\n",
		"name: h\nmessageSize: 64\nrecords: 10\nconsumers: 1\nproducerRateOfMax: .5\n",
		// broken variants
		"", "---\n", "name: [a, b]\n", "nosuchkey: 1\n", "name: a b\nmessageSize: 1\nrecords: 1\n",
		"name: n\nmessageSize: -1\nrecords: 1\n", "name: n\nmessageSize: 1\nduration: -1s\n",
		"name: n\nmessageSize: 1\nduration: 1s\nproducerRateOfMax: 1.5\n",
		"name: n\nmessageSize: 1\nduration: 1s\nproducerRate: -.inf\n",
		"name: n\nmessageSize: 1\nduration: 1s\ncompression: brotli\n",
		"name: n\nmessageSize: 1\nduration: 1s\nacks: 2\n",
		"name: n\nmessageSize: 1\nrecords: 99999999999999999999\n",
		"name: &a n\nmessageSize: *a\n", "a: &a [*a]\n", "name: !!binary aGk=\n",
		"name: d\nmessageSize: 10\nduration: 1s\n---\nbogus: 1\n", "# only a comment\n",
		"name: t\nmessageSize: 10\nduration: 1s\ntopics: 4\nproducers: 2\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWorkload(data)
		if err != nil {
			if !errors.Is(err, ErrWorkload) {
				t.Fatalf("error %v does not wrap ErrWorkload", err)
			}
			return
		}
		_ = w.String()
		// The ranges Config() promises (its error messages): a NaN compares false with every
		// bound, so the checks are written to catch it.
		if !(w.ProducerRate >= 0) {
			t.Fatalf("accepted producerRate %v", w.ProducerRate)
		}
		if !(w.ProducerRateOfMax >= 0 && w.ProducerRateOfMax <= 1) {
			t.Fatalf("accepted producerRateOfMax %v: want a fraction in (0, 1]", w.ProducerRateOfMax)
		}
		c, err := w.Config() // ParseWorkload already ran it: the same answer
		if err != nil {
			t.Fatalf("accepted workload's Config fails: %v", err)
		}
		if c.RecordSize <= 0 || (c.Duration > 0) == (c.Records > 0) {
			t.Fatalf("accepted workload gives record size %d, duration %v, records %d", c.RecordSize, c.Duration, c.Records)
		}
		// Config() checks everything withDefaults checks, so the run takes it.
		d, err := c.withDefaults()
		if err != nil {
			t.Fatalf("accepted workload %q: withDefaults: %v", data, err)
		}
		if err := d.checkProducers(); err != nil {
			t.Fatalf("accepted workload %q leaves topics without a producer: %v", data, err)
		}
	})
}
