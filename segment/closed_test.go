package segment

import (
	"errors"
	"testing"
	"time"
)

// After Delete, operations answer ErrDeleted (which wraps ErrClosed); after Close, ErrClosed
// alone. A Read of a closed log returns at once: its segments are released for good.
func TestOperationsOnDeletedAndClosedLogs(t *testing.T) {
	for _, del := range []bool{false, true} {
		fsys := newMem(t)
		l := mustOpen(t, "/p", testOptions(fsys))
		mustAppend(t, l, makeBatch(t, "a", 3, 1))
		want := ErrClosed
		if del {
			want = ErrDeleted
			if err := l.Delete(); err != nil {
				t.Fatal(err)
			}
		} else if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, want) || (!del && errors.Is(err, ErrDeleted)) {
				t.Errorf("deleted %v: %s: %v, want %v", del, what, err, want)
			}
		}
		_, err := l.Append(makeBatch(t, "b", 1, 5), 7)
		check("Append", err)
		_, err = l.DeleteExpired(l.EndOffset())
		check("DeleteExpired", err)
		check("TruncateTo", l.TruncateTo(1))
		read := make(chan error, 1)
		go func() {
			s, err := l.Read(0, 1<<20, 3)
			s.Release()
			read <- err
		}()
		select {
		case err := <-read:
			check("Read", err)
		case <-time.After(20 * time.Second):
			t.Fatalf("deleted %v: Read of a closed log has not returned after 20 s", del)
		}
	}
}
