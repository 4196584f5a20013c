package chaos

import (
	"math"
	"slices"
)

// denseMap maps int64 keys (offsets, sequence numbers, writer ids) to small values. Keys at or
// above base live in a slice indexed by key - base, which is what a dense log or a writer's
// sequence makes of them; a key far from the others (below base, or so far past the end that
// the slice would grow out of proportion to what it holds) goes to a map instead, so that an
// odd history costs memory in proportion to its events, never to its largest key.
//
// The zero T means "absent": callers keep it free (value ids start at 1).
type denseMap[T comparable] struct {
	base   int64
	dense  []T
	sparse map[int64]*T
	// calls counts the ptr calls: the slice may grow to a few times as many slots as there
	// were calls (plus a constant), which bounds it by the input's size.
	calls int64
}

// denseSlack is how far past the calls the slice may grow: a writer's or a partition's first
// keys may start anywhere in that range without the map.
const denseSlack = 1 << 16

// A key lives in one place: in the map if it went there first (the slice's slot for it, should
// the slice grow over it later, stays zero), else in the slice.

// get is the value at k, or the zero T.
func (m *denseMap[T]) get(k int64) T {
	var zero T
	if k >= m.base && k-m.base < int64(len(m.dense)) {
		if v := m.dense[k-m.base]; v != zero || len(m.sparse) == 0 {
			return v
		}
	}
	if p, ok := m.sparse[k]; ok {
		return *p
	}
	return zero
}

// ptr is the slot of k, created (zero) if absent.
func (m *denseMap[T]) ptr(k int64) *T {
	m.calls++
	if len(m.sparse) > 0 {
		if p, ok := m.sparse[k]; ok {
			return p
		}
	}
	if k >= m.base && k-m.base < math.MaxInt32 {
		i := k - m.base
		if i < int64(len(m.dense)) {
			return &m.dense[i]
		}
		if need := i + 1; need <= 8*m.calls+denseSlack {
			old := len(m.dense)
			m.dense = grow(m.dense, int(need)-old)[:need]
			clear(m.dense[old:])
			return &m.dense[i]
		}
	}
	if m.sparse == nil {
		m.sparse = make(map[int64]*T)
	}
	p := new(T)
	m.sparse[k] = p
	return p
}

// each calls fn for every non-zero value in key order.
func (m *denseMap[T]) each(fn func(k int64, v T)) {
	var zero T
	keys := make([]int64, 0, len(m.sparse))
	for k := range m.sparse {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	j := 0
	for i, v := range m.dense {
		k := m.base + int64(i)
		for ; j < len(keys) && keys[j] < k; j++ {
			if sv := *m.sparse[keys[j]]; sv != zero {
				fn(keys[j], sv)
			}
		}
		if v != zero {
			fn(k, v)
		}
	}
	for ; j < len(keys); j++ {
		if sv := *m.sparse[keys[j]]; sv != zero {
			fn(keys[j], sv)
		}
	}
}

// grow is slices.Grow doubling the capacity: append's growth by a quarter past a few hundred
// elements would allocate five times the final size of a slice built one element at a time.
func grow[T any](s []T, n int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	return slices.Grow(s, max(n, cap(s)))
}
