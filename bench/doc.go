// Package bench is Sluice's benchmark harness, the engine behind `sluice bench`: produce,
// consume and end-to-end runs against any Driver (Sluice through its Go client here, peers in
// bench/peers), workload files, machine limit probes and reports people can trust.
//
// What the figures mean:
//
//   - Latency is kept in HDR histograms (microsecond resolution, 3 significant digits, up to
//     60 s), one per producer, merged for the summary.
//   - With a rate, a run is open-loop: record i of a producer is due at start + i/rate, and its
//     latency is measured from that scheduled time to its acknowledgement (or its receipt, for
//     e2e). A stall in the client or the broker therefore shows up in the latency of every
//     record that was due during it, instead of being hidden by the sender waiting (coordinated
//     omission). Without a rate, records go out flat out and latency runs from Send to ack,
//     measured for one record in 16 (Config.FlatOutClockEvery): two clock reads per record
//     cost a quarter of a 100 B run's throughput on a 2-vCPU VM.
//   - An open-loop run that falls behind stops sending at its end plus a grace (behindGrace:
//     5 s, or a tenth of the duration), and counts the records due in it that were never sent
//     (Result.Unsent); the run then fails with ErrFellBehind. Its throughput is that of the
//     records sent. A run of Records at a Rate ends when its schedule does, Records/Rate after
//     the warm-up. Probes of the maximum rate that fall behind are only not sustained.
//   - A consume run in a group commits exactly the records it counted (Rewinder): a run of
//     Records stops counting in the middle of a poll, and the group's next run starts with
//     the rest of it.
//   - The pacer's own lateness is measured too (Result.SendLagMs): a record sent after its due
//     time carries that lag in its latency. Go's timers fire up to 1 ms late while the process
//     is idle, so runs of up to 10,000 records/s in all also set a timerfd alarm that wakes the
//     runtime on time; faster runs rely on Go's timers, which are precise while it is busy.
//   - --rate-of-max probes write to topics of their own, deleted after each probe by drivers
//     that can (TopicDeleter).
//   - The warm-up (Config.Warmup) runs first; records due during it are sent but not counted.
//   - Throughput is counted from the end of the warm-up to the last acknowledgement (produce),
//     or from the first to the last record received (consume); a paced run of Records over
//     its whole schedule at least (Records/Rate), as a run of a Duration is.
//   - CPU (Result.CPUSeconds) is the process's user and system time over the same window
//     (within 5 ms of its end, for runs that end with a wait for more records), client,
//     harness and any in-process broker together, plus a broker process's (BrokerCPUReader:
//     --broker-process), which is also reported apart; the summary shows it as cores kept
//     busy and seconds per GB (cpu.go).
//   - Drivers whose producers count their requests (RequestCounter: Sluice's Producer.Stats,
//     kgo's hooks) report produce requests and batches over the whole run, warm-up included:
//     how many batches a request carried explains much of a run's speed.
//   - MB/s is 10^6 bytes per second of record values (and keys); "gbps" in the limits report is
//     GB/s, 10^9 bytes per second, so the two compare directly.
//   - A run can be measured against the machine's limits that bound it (Result.Limits,
//     bounds.go): the limits probes its mode and transport meet (BoundingProbes) run right
//     before it, and each Bound is the run's MB/s over one probe's. On a shared machine the
//     limits drift as much as the runs, so a ratio is only quoted against probes made next to
//     its own run; repeated runs report the median of the runs' own ratios.
//   - Against a cluster of broker processes (ClusterSluice: `sluice bench --brokers N`), the
//     run's topics get the cluster's replication factor and min.insync.replicas, the CPU
//     counts every broker process's (summed in BrokerCPUSeconds) and the peak RSS is listed
//     per broker (BrokerRSSPeakMBEach) and summed; Result.Cluster names the shape.
//   - Follower lag (Config.FollowerLagEvery, a ReplicaPositionReader driver) is sampled over
//     the measured window: per follower and sample, the leader's log end minus the
//     follower's in records, and in time how long before the sample the leader's end was
//     where the follower's is (interpolated between the leader's sampled ends; 0 when caught
//     up), good to about one sampling interval.
//
// Files: driver.go (the Driver interface), sluice.go (the Sluice driver and the embedded
// broker), cluster.go (the driver against a cluster of broker processes), followerlag.go (the
// follower lag sampler), run.go (produce, consume and e2e runs), sched.go (the open-loop
// pacer; its alarm in finetimer_*.go), hist.go (histograms), payload.go (record values),
// workload.go (YAML workloads), limits.go (machine probes), bounds.go (a run against them),
// report.go (summaries and JSON), compare.go (one workload against several systems).
package bench
