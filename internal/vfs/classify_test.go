package vfs

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	wrap := func(e error) error {
		return fmt.Errorf("write checkpoint: %w", &os.PathError{Op: "open", Path: "/x", Err: e})
	}
	for _, tc := range []struct {
		err               error
		resource, noSpace bool
	}{
		{syscall.EMFILE, true, false},
		{syscall.ENFILE, true, false},
		{syscall.ENOMEM, true, false},
		{syscall.ENOSPC, false, true},
		{syscall.EDQUOT, false, true},
		{syscall.EIO, false, false},
		{syscall.EROFS, false, false},
	} {
		err := wrap(tc.err)
		if got := IsResource(err); got != tc.resource {
			t.Errorf("IsResource(%v) = %v", err, got)
		}
		if got := IsNoSpace(err); got != tc.noSpace {
			t.Errorf("IsNoSpace(%v) = %v", err, got)
		}
		if got := IsTransient(err); got != (tc.resource || tc.noSpace) {
			t.Errorf("IsTransient(%v) = %v", err, got)
		}
	}
}
