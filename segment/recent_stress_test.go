package segment

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// Across rolls (with and without a standby), multi-batch appends, offset gaps, truncations
// into the active and into earlier segments, and reopening, every segment's remembered batches
// answer locate exactly as the index and the file do, for all offsets and for every limit a
// reader may have loaded, on MemFS, OS files and mmap'd appends. Concurrent tail readers run
// alongside (for -race).
func TestRecentBatchesThroughRollsTruncationsAndReopens(t *testing.T) {
	for _, mode := range []string{"mem", "os", "os-mmap", "os-standby"} {
		t.Run(mode, func(t *testing.T) {
			var fsys vfs.FS
			dir := "/p"
			if mode == "mem" {
				fsys = newMem(t)
			} else {
				fsys = vfs.Default
				dir = t.TempDir()
			}
			o := testOptions(fsys)
			o.SegmentBytes = 8 << 10
			o.PreallocateBytes = -1
			if mode == "os-mmap" {
				o.MmapAppend = true
			}
			if mode == "os-standby" {
				o.PreallocateBytes = 4 << 10
			}
			l := mustOpen(t, dir, o)
			defer func() { l.Close() }()
			rng := rand.New(rand.NewPCG(11, 12))
			var stop atomic.Bool
			var wg sync.WaitGroup
			var lmu sync.RWMutex
			wg.Add(1)
			go func() { // a tail reader
				defer wg.Done()
				for !stop.Load() {
					lmu.RLock()
					ll := l
					end := ll.EndOffset()
					if end > 0 {
						s, err := ll.Read(end-1, 1<<20, end)
						if err == nil {
							s.Release()
						}
					}
					lmu.RUnlock()
				}
			}()
			check := func(stage string, ends map[*Segment][]int64) {
				t.Helper()
				next := l.EndOffset()
				for _, s := range l.Segments() {
					limits := append([]int64{s.size.Load()}, ends[s]...)
					var ha, hb [batch.HeaderSize]byte
					for _, limit := range limits {
						if limit > s.size.Load() {
							continue
						}
						for off := s.base - 2; off <= next+2; off++ {
							pos, h, found, ok := recentOf(s).locate(off, limit, &ha)
							if !ok {
								continue
							}
							wp, wh, wf, err := s.locateInFile(off, limit, &hb)
							if err != nil {
								t.Fatal(err)
							}
							if pos != wp || found != wf || (found && string(h) != string(wh)) {
								t.Fatalf("%s: seg %d locate(%d, %d): mem %d %v file %d %v", stage, s.base, off, limit, pos, found, wp, wf)
							}
						}
					}
				}
			}
			ends := map[*Segment][]int64{}
			next := batch.Offset(0)
			for step := range 200 {
				switch r := rng.IntN(20); {
				case r == 0 && l.EndOffset() > 0:
					to := batch.Offset(rng.Int64N(int64(l.EndOffset()) + 1))
					if err := l.TruncateTo(to); err != nil {
						t.Fatal(err)
					}
					next = l.EndOffset()
					ends = map[*Segment][]int64{}
				case r == 1:
					lmu.Lock()
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					l = mustOpen(t, dir, o)
					lmu.Unlock()
					ends = map[*Segment][]int64{}
				default:
					var buf []byte
					for range 1 + rng.IntN(3) {
						b := makeBatch(t, "r", 1+rng.IntN(5), int64(step))
						if rng.IntN(4) == 0 {
							widenBatch(b, int32(1+rng.IntN(3)))
						}
						batch.Batch(b).SetBaseOffset(next)
						next = batch.Batch(b).NextOffset()
						buf = append(buf, b...)
					}
					if _, err := l.AppendAsFollower(buf); err != nil {
						t.Fatal(err)
					}
					s := l.active
					ends[s] = append(ends[s], s.size.Load())
				}
				if step%5 == 4 {
					check("step", ends)
				}
			}
			check("end", ends)
			stop.Store(true)
			wg.Wait()
		})
	}
}
