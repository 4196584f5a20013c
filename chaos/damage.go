package chaos

import "math/rand/v2"

// DamageKind is one way of damaging a stopped broker's files.
type DamageKind string

const (
	DamageTruncateTail DamageKind = "truncate-tail" // cut a segment's last bytes (a torn append)
	DamageFlipBits     DamageKind = "flip-bits"     // flip bits in a segment's record data
	DamageZeroPage     DamageKind = "zero-page"     // zero a 4 KiB page of a segment
	DamageDeleteIndex  DamageKind = "delete-index"  // remove a segment's offset or time index
)

// DamageKinds are every kind, in the order the schedule cycles through them.
var DamageKinds = []DamageKind{DamageTruncateTail, DamageFlipBits, DamageZeroPage, DamageDeleteIndex}

// Damage damages the files under dataDir (a stopped broker's log.dirs) in the way kind names,
// choosing the partition, segment and place with rng among the chaos topics' partitions
// (topics), and returns what it did, for the history ("flip-bits: chaos-1-3/00000000000000000000.log
// byte 81234 bit 5"). It does nothing, saying so, when there is nothing of that kind to damage.
func Damage(dataDir string, topics []string, kind DamageKind, rng *rand.Rand) (string, error) {
	panic("chaos: stream A")
}
