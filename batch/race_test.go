//go:build race

package batch

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// pooled-encoder allocation counts mean nothing under -race.
const raceEnabled = true
