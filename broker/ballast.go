package broker

import "os"

// makeBallast makes the ballast file (diskspace.go) at path holding size bytes of disk,
// durably: allocate reserves its blocks.
func makeBallast(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = allocate(f, size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeZeros fills f's first size bytes with zeros, a megabyte at a time: the ballast's
// blocks where fallocate is missing (a compressing filesystem would not keep them).
func writeZeros(f *os.File, size int64) error {
	zeros := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; {
		n, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}
