package chaos

import "time"

// Summary is a run's summary.json: its settings, what happened and the checker's findings.
type Summary struct {
	Version  string        `json:"version"`
	Verdict  string        `json:"verdict"`
	Passed   bool          `json:"passed"`
	Seed     uint64        `json:"seed"`
	Brokers  int           `json:"brokers"`
	Faults   []string      `json:"faults"`   // the kinds enabled
	Interval time.Duration `json:"interval"` // between fault starts
	Duration time.Duration `json:"duration"` // of the fault phase asked
	Elapsed  time.Duration `json:"elapsed"`  // of the whole run
	Workload Workload      `json:"workload"`
	Injected []FaultRecord `json:"injected"` // every fault, in order
	Result   *Result       `json:"result"`
	// Failures are the promises the harness itself saw broken, beside the checker's anomalies:
	// a broker that exited on its own, one that did not come back after a fault, a controlled
	// shutdown past 30 s. Any fails the run.
	Failures  []string  `json:"failures"`
	Command   string    `json:"command"` // the command line that replays the run
	StartedAt time.Time `json:"started_at"`
}

// FaultRecord is one fault of a run, as summary.json and the timeline show it. WriteReport
// (report.go) writes the run's directory from a Summary.
type FaultRecord struct {
	ID      int           `json:"id"`
	Kind    string        `json:"kind"`
	Targets []int32       `json:"targets"`
	Start   time.Duration `json:"start"` // since the run's start
	End     time.Duration `json:"end"`   // healed
	Detail  string        `json:"detail"`
}
