package broker

import "fmt"

// checkReplicaFetch is the whole-file check of the replica fetch keys (issue #23): a follower's
// long poll must end well within the time the leader allows it to fall behind, or a follower
// of an idle partition, answered only at the end of each max wait, would drop out of the ISR
// between two fetches (Kafka's rule: replica.fetch.wait.max.ms below replica.lag.time.max.ms).
// Keys left unset take their defaults (500 ms and 30 s).
func (c *Config) checkReplicaFetch() error {
	d := DefaultConfig()
	wait := positive(c.ReplicaFetchWait, d.ReplicaFetchWait)
	lag := positive(c.ReplicaLagTimeMax, d.ReplicaLagTimeMax)
	if wait >= lag {
		return fmt.Errorf("replica.fetch.wait.max.ms %d must be below replica.lag.time.max.ms %d: a follower answered only at the end of each fetch's wait would fall out of the ISR between two fetches",
			wait.Milliseconds(), lag.Milliseconds())
	}
	return nil
}
