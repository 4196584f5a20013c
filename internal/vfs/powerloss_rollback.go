package vfs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
)

// RollBackReport says what RollBack changed.
type RollBackReport struct {
	Files      int   // files rolled back
	BytesLost  int64 // unsynced bytes dropped
	TornFiles  int   // files whose last kept page was torn
	Overwrites int   // synced ranges restored from their pre-images (or shadow pages that differed)
}

// RollBack applies a power cut to the files a killed process journalled in journal, then
// removes the journal. The process must be dead.
//
// Files are taken in path order, so that a seeded opts.Rand gives the same result every
// time; each is cut to its durable size plus, with KeepUnsyncedPrefix, a random prefix of the
// bytes past it (drawn as MemFS.Crash draws it), its overwritten durable bytes restored, and
// with TearLastPage the last kept page torn. A file tracked by the journal that is gone, or
// whose path now names another file (an inode that changed in a rename the kill cut short),
// is left alone. A file created and never synced is emptied; its directory entry stays.
func RollBack(journal string, opts CrashOptions) (RollBackReport, error) {
	var rep RollBackReport
	data, err := os.ReadFile(journal)
	if err != nil {
		return rep, fmt.Errorf("vfs: roll back: %w", err)
	}
	files, err := readJournal(data)
	if err != nil {
		return rep, fmt.Errorf("vfs: roll back %s: %w", journal, err)
	}
	order := make([]*rbFile, 0, len(files))
	for _, f := range files {
		order = append(order, f)
	}
	slices.SortFunc(order, func(a, b *rbFile) int { return strings.Compare(a.path, b.path) })
	for _, f := range order {
		if err := rollBackFile(journal, f, opts, &rep); err != nil {
			return rep, fmt.Errorf("vfs: roll back %s: %w", f.path, err)
		}
	}
	removeSidecars(journal)
	if err := os.Remove(journal); err != nil {
		return rep, fmt.Errorf("vfs: roll back: %w", err)
	}
	return rep, nil
}

func rollBackFile(journal string, rf *rbFile, opts CrashOptions, rep *RollBackReport) error {
	f, err := os.OpenFile(rf.path, os.O_RDWR, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if inode(fi) != rf.ino {
		return nil
	}
	cur := fi.Size()
	base := rf.synced
	var shadow *os.File
	if rf.shadow {
		shadow, err = os.Open(fmt.Sprintf("%s.shadow.%d", journal, rf.id))
		if err != nil {
			return err
		}
		defer shadow.Close()
		sfi, err := shadow.Stat()
		if err != nil {
			return err
		}
		base = sfi.Size()
	}
	size := base
	if cur > base && opts.Rand != nil && opts.KeepUnsyncedPrefix {
		size += int64(opts.Rand.IntN(int(cur-base) + 1))
	}
	changed := false
	if size != cur {
		if err := f.Truncate(size); err != nil {
			return err
		}
		changed = true
		rep.BytesLost += max(0, cur-size)
	}
	if shadow != nil {
		n, err := restorePages(f, shadow, base)
		if err != nil {
			return err
		}
		rep.Overwrites += n
		changed = changed || n > 0
	}
	for i := len(rf.pre) - 1; i >= 0; i-- {
		if _, err := f.WriteAt(rf.pre[i].data, rf.pre[i].off); err != nil {
			return err
		}
		rep.Overwrites++
		changed = true
	}
	if opts.Rand != nil && opts.KeepUnsyncedPrefix && opts.TearLastPage && size > base {
		// As MemFS.Crash: garbage from a random byte of the last kept page (not before the
		// durable end) to the end.
		start := size - (size-1)%PageSize - 1
		start = max(start, base)
		from := start + int64(opts.Rand.IntN(int(size-start)))
		garbage := make([]byte, size-from)
		for i := range garbage {
			garbage[i] = byte(opts.Rand.Uint32())
		}
		if _, err := f.WriteAt(garbage, from); err != nil {
			return err
		}
		rep.TornFiles++
		changed = true
	}
	if changed {
		rep.Files++
	}
	return nil
}

// restorePages writes into f every page of [0, size) where it differs from shadow, and
// returns how many pages it wrote.
func restorePages(f, shadow *os.File, size int64) (int, error) {
	want := make([]byte, PageSize)
	have := make([]byte, PageSize)
	n := 0
	for off := int64(0); off < size; off += PageSize {
		w, h := want[:min(PageSize, size-off)], have[:min(PageSize, size-off)]
		k, err := shadow.ReadAt(w, off)
		if err != nil && err != io.EOF {
			return n, err
		}
		clear(w[k:])
		k, err = f.ReadAt(h, off)
		if err != nil && err != io.EOF {
			return n, err
		}
		clear(h[k:])
		if bytes.Equal(w, h) {
			continue
		}
		if _, err := f.WriteAt(w, off); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// inode is fi's inode number (0 where the system has none to give).
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
