package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// clusterProc is a `sluice cluster local` child process, as the failover benchmark (and the
// process-level tests) run one: the nodes it printed, by id, and its output.
type clusterProc struct {
	cmd       *exec.Cmd
	nodes     map[int32]clusterProcNode
	bootstrap []string
	out       *syncBuffer
	exited    chan struct{} // closed once cmd.Wait returned
}

// clusterProcNode is one broker process of the cluster, as `cluster local` printed it.
type clusterProcNode struct {
	pid    int
	listen string
}

// syncBuffer is a bytes.Buffer safe for exec's copier goroutine and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startClusterProc runs `exe cluster local args...` and waits until it prints "cluster ready",
// or exits, or readyTimeout passes (then it is stopped). Stop ends it.
func startClusterProc(exe string, args []string, readyTimeout time.Duration) (*clusterProc, error) {
	return startClusterProcContext(context.Background(), exe, args, readyTimeout)
}

// startClusterProcContext is startClusterProc whose wait also ends with ctx (Ctrl-C of a
// bench), the cluster then stopped.
func startClusterProcContext(ctx context.Context, exe string, args []string, readyTimeout time.Duration) (*clusterProc, error) {
	c := &clusterProc{nodes: map[int32]clusterProcNode{}, out: &syncBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(exe, append([]string{"cluster", "local"}, args...)...)
	pr, pw := io.Pipe()
	c.cmd.Stdout = io.MultiWriter(pw, c.out)
	c.cmd.Stderr = c.out
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = c.cmd.Wait()
		pw.Close()
		close(c.exited)
	}()
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "node ") && strings.Contains(line, " pid="):
				id, n, err := parseNodeLine(line)
				if err != nil {
					ready <- err
					return
				}
				c.nodes[id] = n
			case strings.HasPrefix(line, "bootstrap.servers="):
				c.bootstrap = strings.Split(strings.TrimPrefix(line, "bootstrap.servers="), ",")
			case strings.HasPrefix(line, "cluster ready"):
				ready <- nil
				_, _ = io.Copy(io.Discard, pr) // keep the child's stdout flowing
				return
			}
		}
		ready <- errors.New("exited before the cluster was ready")
	}()
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case err := <-ready:
		if err != nil {
			_ = c.Stop(10 * time.Second)
			return nil, fmt.Errorf("cluster local: %w:\n%s", err, c.out.String())
		}
		return c, nil
	case <-timer.C:
		_ = c.Stop(10 * time.Second)
		return nil, fmt.Errorf("cluster local: not ready within %v:\n%s", readyTimeout, c.out.String())
	case <-ctx.Done():
		_ = c.Stop(10 * time.Second)
		return nil, fmt.Errorf("cluster local: interrupted before the cluster was ready: %w", ctx.Err())
	}
}

// parseNodeLine reads "node 0: pid=1234 listener=127.0.0.1:9092 ...".
func parseNodeLine(line string) (int32, clusterProcNode, error) {
	var n clusterProcNode
	head, rest, _ := strings.Cut(line, ":")
	id, err := strconv.ParseInt(strings.TrimPrefix(head, "node "), 10, 32)
	if err != nil {
		return 0, n, fmt.Errorf("node line %q: %w", line, err)
	}
	for _, f := range strings.Fields(rest) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "pid":
			if n.pid, err = strconv.Atoi(v); err != nil {
				return 0, n, fmt.Errorf("node line %q: %w", line, err)
			}
		case "listener":
			n.listen = v
		}
	}
	return int32(id), n, nil
}

// Signal sends sig to node id's broker process.
func (c *clusterProc) Signal(id int32, sig syscall.Signal) error {
	n, ok := c.nodes[id]
	if !ok {
		return fmt.Errorf("no node %d", id)
	}
	return syscall.Kill(n.pid, sig)
}

// Stop sends SIGTERM to cluster local (which stops its brokers) and waits up to timeout, then
// kills it, and with it any broker still running, by pid.
func (c *clusterProc) Stop(timeout time.Duration) error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.exited:
		return nil
	case <-t.C:
	}
	// cluster local did not finish stopping them: its brokers are still its children (not
	// reaped), so their pids are still theirs.
	for _, n := range c.nodes {
		_ = syscall.Kill(n.pid, syscall.SIGKILL)
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
	return fmt.Errorf("cluster local did not stop within %v of SIGTERM: killed", timeout)
}

// partitionLeader asks the brokers of bootstrap, in turn, for topic's partition's leader, and
// returns the first answer that names a live one.
func partitionLeader(ctx context.Context, bootstrap []string, topic string, partition int32) (int32, int32, error) {
	var last error = errors.New("no broker answered")
	for _, addr := range bootstrap {
		leader, epoch, err := func() (int32, int32, error) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			c, err := client.Dial(cctx, addr, "sluice-bench")
			if err != nil {
				return -1, -1, err
			}
			defer c.Close()
			var md wire.MetadataResponse
			if err := c.Call(cctx, &wire.MetadataRequest{Topics: []string{topic}}, &md); err != nil {
				return -1, -1, err
			}
			for _, t := range md.Topics {
				for _, p := range t.Partitions {
					if p.Partition == partition && p.Leader >= 0 {
						return p.Leader, p.LeaderEpoch, nil
					}
				}
			}
			return -1, -1, fmt.Errorf("%s: no leader of %s-%d", addr, topic, partition)
		}()
		if err == nil {
			return leader, epoch, nil
		}
		last = err
	}
	return -1, -1, last
}

// waitLeader polls the brokers of bootstrap until partition 0 of topic has a leader other than
// not (-1: any), and returns it and its epoch.
func waitLeader(ctx context.Context, bootstrap []string, topic string, not int32) (int32, int32, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		leader, epoch, err := partitionLeader(ctx, bootstrap, topic, 0)
		if err == nil && leader != not {
			return leader, epoch, nil
		}
		if err == nil {
			err = fmt.Errorf("still led by %d", leader)
		}
		select {
		case <-ctx.Done():
			return -1, -1, errors.Join(err, ctx.Err())
		case <-tick.C:
		}
	}
}
