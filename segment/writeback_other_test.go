//go:build !linux

package segment

import "testing"

// fallocateWorks is false: without fallocate(FALLOC_FL_KEEP_SIZE), vfs reserves no blocks on
// this system (its Preallocate does nothing), so there are none to check.
func fallocateWorks(t *testing.T, _ string) bool {
	t.Log("no fallocate on this system: not checking allocated blocks")
	return false
}
