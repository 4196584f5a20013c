package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// finalFile is final.json: the FinalState of a run, beside its history, so that `sluice chaos
// check` can check the run again (a map keyed by TopicPartition has no JSON form).
type finalFile struct {
	Partitions  []finalPartition `json:"partitions"`
	Divergences []Divergence     `json:"divergences"`
	Options     CheckOptions     `json:"options"`
	Elapsed     time.Duration    `json:"fault_phase"` // the fault phase's length, for the verdict
}

type finalPartition struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	LogStart      int64  `json:"log_start"`
	HighWatermark int64  `json:"high_watermark"`
}

// writeFinal writes dir/final.json.
func writeFinal(dir string, fs FinalState, opts CheckOptions, phase time.Duration) error {
	f := finalFile{Divergences: fs.Divergences, Options: opts, Elapsed: phase}
	for tp, hw := range fs.HighWatermarks {
		f.Partitions = append(f.Partitions, finalPartition{tp.Topic, tp.Partition, fs.LogStarts[tp], hw})
	}
	sort.Slice(f.Partitions, func(i, j int) bool {
		a, b := f.Partitions[i], f.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "final.json"), append(b, '\n'), 0o644)
}

// CheckDir checks a run's directory again: its history.jsonl against its final.json, with the
// options the run used. It returns the findings and the verdict line.
func CheckDir(dir string) (*Result, string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "final.json"))
	if err != nil {
		return nil, "", fmt.Errorf("chaos: %w (a run writes it once its final read is done)", err)
	}
	var f finalFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, "", fmt.Errorf("chaos: %s: %w", filepath.Join(dir, "final.json"), err)
	}
	fs := FinalState{HighWatermarks: map[TopicPartition]int64{}, LogStarts: map[TopicPartition]int64{}, Divergences: f.Divergences}
	for _, p := range f.Partitions {
		tp := TopicPartition{p.Topic, p.Partition}
		fs.HighWatermarks[tp], fs.LogStarts[tp] = p.HighWatermark, p.LogStart
	}
	hist := filepath.Join(dir, "history.jsonl")
	res, err := Check(func(fn func(Event) error) error {
		hf, err := os.Open(hist)
		if err != nil {
			return err
		}
		defer hf.Close()
		return ReadHistory(hf, fn)
	}, fs, f.Options)
	if err != nil {
		return nil, "", err
	}
	return res, res.Verdict(f.Elapsed), nil
}
