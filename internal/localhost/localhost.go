// Package localhost holds what the commands that run broker processes on this host (`sluice
// cluster local`, `sluice chaos`) share: picking free loopback ports and reading the tail of
// a process's log for an error message.
package localhost

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
)

// FreePorts returns n distinct loopback ports that were free a moment ago (listened on, then
// closed): another process may take one before the broker does, which its start-up failure
// then says.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	out := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("picking a free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// LogTail is the last n lines of a log file, for an error message; a file it cannot read
// gives the reason in parentheses.
func LogTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
