package vfs

// PowerLossFS brings MemFS's crash semantics to a real broker process (`sluice serve
// --simulate-power-loss JOURNAL`, which `sluice chaos` uses): a kill -9 of a process keeps its
// page cache, so by itself it never loses a byte the process wrote; a power cut loses every
// byte not yet fsynced. PowerLossFS writes through to the operating system's files (sendfile
// and mmap keep working) and records in a journal file beside the data what is durable: each
// file's synced size, the pre-images of synced bytes overwritten since, and for mapped files
// their contents as of the last Flush or Sync. The journal is written without fsync (the
// page cache outlives the kill, and the journal need only survive the process), and is
// compacted as it grows.
//
// After the process is killed, RollBack(journal, opts) turns the files into what a machine
// would find after a power cut at that moment: each file back to its durable contents, plus,
// as CrashOptions says, a random prefix of the unsynced appends with the last page torn.
// Directory operations (create, rename, remove) are taken as durable at once, which is more
// forgiving than ext4 (see the type's doc for what that leaves untested).
//
// It also injects a full disk: SetDiskFull makes every write, create, truncate that grows and
// preallocation fail with ENOSPC until it is turned off (the broker's serve polls a control
// file for it).
type PowerLossFS struct{}

// NewPowerLossFS returns the OS file system journalled into journal (created, or truncated: a
// process starts with everything on disk durable, which RollBack made true).
func NewPowerLossFS(journal string) (*PowerLossFS, error) { panic("vfs: stream A") }

// RollBackReport says what RollBack changed.
type RollBackReport struct {
	Files      int   // files rolled back
	BytesLost  int64 // unsynced bytes dropped
	TornFiles  int   // files whose last kept page was torn
	Overwrites int   // synced ranges restored from their pre-images
}

// RollBack applies a power cut to the files a killed process journalled in journal, then
// removes the journal. The process must be dead.
func RollBack(journal string, opts CrashOptions) (RollBackReport, error) {
	panic("vfs: stream A")
}
