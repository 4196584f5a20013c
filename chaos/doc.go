// Package chaos is `sluice chaos`: a fault-injection harness that runs a cluster of real
// `sluice serve` processes on this host, drives workloads against it through a fault proxy,
// injects faults on a seeded schedule, and checks the recorded history for what Jepsen's Kafka
// test names: lost writes, duplicates, inconsistent offsets, non-monotonic sends, unexpected
// values, consumer skips and backward jumps, commit regressions, and replica divergence; and
// what a consumer group that commits after processing promises: every committed record
// delivered, none skipped or delivered again past a commit.
//
// # Pieces (one job per file)
//
//   - history.go: the history, one JSON object per line (history.jsonl): every send with its
//     outcome, every read with its offsets and values, every group delivery, assignment,
//     revocation, crash and commit, every fault and heal. The
//     Recorder writes it concurrently; ReadHistory reads it back (`sluice chaos check`).
//   - check.go: the checker, a pure function of a history and the final state. It owns the
//     anomaly definitions; see Check.
//   - workload.go, verify.go: the writers and readers (client.Producer, client.Consumer by
//     assignment), and the end of a run (every partition read fully from its leader; every
//     replica's log compared up to the high watermark).
//   - workload_group.go, check_group.go: the group consumers (one group, commit after
//     processing, crashed and restarted by the harness) and the checks of their deliveries:
//     at least once, and exactly once among the committed records.
//   - cluster.go: the broker processes (start, kill -9, SIGTERM, SIGSTOP/SIGCONT, power loss,
//     restart), each broker's client and controller listeners fronted by the fault proxy.
//   - faults.go, schedule.go: the fault kinds, and the schedule a seed replays.
//   - damage.go: damage to a stopped broker's files (a truncated segment tail, flipped bits, a
//     zeroed page, a deleted index).
//   - run.go: one run, from start to verdict; report.go: its directory (history, checks, JSON
//     summary, HTML timeline).
//   - faultproxy/: the TCP proxy between every client and broker and between brokers.
//
// # Invariants
//
//   - Every process the harness starts is stopped by its pid before Run returns, whether the run
//     ends, fails or is interrupted; the history written so far stays on disk.
//   - The checker never trusts a writer's or reader's own view: it only reads the history.
//   - A seed fixes the schedule: the faults' kinds, their order, their holds and their earliest
//     starts, and the rng that picks targets among the brokers in the roles the fault names
//     (which broker leads a partition is the cluster's choice, read at the moment of the
//     fault). A fault starts at its time or once the one before is over (healed, and every
//     partition writable again), whichever is later, so that each outage is one fault's.
package chaos
