package report

import (
	"fmt"
	"runtime"
)

// Machine is what a report says about the host a run measured: enough to tell two pages'
// numbers apart when they come from different machines.
type Machine struct {
	Cores       int    // runtime.NumCPU: the CPUs this process may run on
	MemoryBytes uint64 // physical memory (MemTotal); 0 where the system does not say
	OS, Arch    string // runtime.GOOS, runtime.GOARCH
	Kernel      string // uname: "Linux 6.1.0-18-amd64"; "" where not read
	Dir         string // the data directory Filesystem describes
	Filesystem  string // the file system type of Dir ("ext4", "tmpfs", ...); "" where not read
}

// DetectMachine reads the machine this process runs on; dir is the run's data directory, whose
// file system it names. What cannot be read is left empty (never an error: a report without
// the kernel's name is still a report).
func DetectMachine(dir string) Machine {
	m := Machine{Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, Dir: dir}
	detectPlatform(&m)
	return m
}

// Settings is m as the header's key/value pairs, in a fixed order.
func (m Machine) Settings() []Setting {
	s := []Setting{{"cores", fmt.Sprint(m.Cores)}}
	if m.MemoryBytes > 0 {
		s = append(s, Setting{"memory", fmt.Sprintf("%.1f GiB", float64(m.MemoryBytes)/(1<<30))})
	}
	kernel := m.Kernel
	if kernel == "" {
		kernel = m.OS
	}
	s = append(s, Setting{"kernel", kernel + " (" + m.Arch + ")"})
	if m.Filesystem != "" {
		fs := m.Filesystem
		if m.Dir != "" {
			fs += " (" + m.Dir + ")"
		}
		s = append(s, Setting{"filesystem", fs})
	}
	return s
}
