//go:build race

package client_test

// raceEnabled: the race detector makes sync.Pool drop items at random and adds allocations
// of its own, so allocation counts mean nothing under -race.
const raceEnabled = true
