package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// BrokerProcess is a Sluice broker in a child process (`exe serve`) on a fresh data directory,
// listening on an ephemeral loopback TCP port and a unix socket: a producer application and its
// broker on one host, each with its own runtime and scheduler, which an in-process broker does
// not show (the shared-memory producer gained +33 % against one, +16 % against an in-process
// broker: BENCHMARKS.md, Unix socket and shared memory).
type BrokerProcess struct {
	cmd  *exec.Cmd
	dir  string
	sock string // unix socket path
	tcp  string // host:port, from the broker's metadata
	logs *lockedBuffer
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
}

// lockedBuffer collects the child's output (for an error that says why it did not start).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 64<<10 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartBrokerProcess runs `exe serve` on a new temporary directory (under dir, or the system's
// temporary directory if dir is empty), with extra arguments args, and waits until it answers
// on its unix socket. Close stops it and removes the directory.
func StartBrokerProcess(ctx context.Context, exe, dir string, args ...string) (*BrokerProcess, error) {
	tmp, err := os.MkdirTemp(dir, "sluice-bench-")
	if err != nil {
		return nil, err
	}
	p := &BrokerProcess{dir: tmp, sock: filepath.Join(tmp, "s.sock"), logs: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(exe, append([]string{"serve", "--data-dir", tmp, "--listen", "127.0.0.1:0", "--unix", p.sock}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	p.cmd.SysProcAttr = childAttr()
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("bench: start broker process: %w", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	if err := p.awaitReady(ctx); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	return p, nil
}

// awaitReady polls the unix socket until the broker answers a Metadata request, which also
// says its TCP address.
func (p *BrokerProcess) awaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		select {
		case <-p.done:
			return fmt.Errorf("bench: broker process exited (%v) before it was ready: %s", p.err, p.logs.String())
		case <-ctx.Done():
			return fmt.Errorf("bench: broker process not ready: %w: %s", ctx.Err(), p.logs.String())
		default:
		}
		if c, err := client.Dial(ctx, "unix://"+p.sock, "sluice-bench"); err == nil {
			var md wire.MetadataResponse
			err = c.Call(ctx, &wire.MetadataRequest{Topics: []string{}}, &md)
			c.Close()
			if err == nil && len(md.Brokers) > 0 {
				b := md.Brokers[0]
				p.tcp = b.Host + ":" + strconv.Itoa(int(b.Port))
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond) // poll interval while the process starts
	}
}

// Addr is the address clients use over transport (TransportTCP or TransportUnix).
func (p *BrokerProcess) Addr(transport string) (string, error) {
	switch transport {
	case TransportTCP, "":
		return p.tcp, nil
	case TransportUnix:
		return "unix://" + p.sock, nil
	}
	return "", fmt.Errorf("bench: unknown transport %q (want tcp or unix)", transport)
}

// CPU returns the broker process's user and system CPU time so far.
func (p *BrokerProcess) CPU() (time.Duration, bool) { return childCPU(p.cmd.Process.Pid) }

// RSSPeakMB returns the broker process's peak resident set so far (VmHWM, as MemoryMB reads
// this process's), 0 where /proc does not say.
func (p *BrokerProcess) RSSPeakMB() float64 { return procRSSPeakMB(p.cmd.Process.Pid) }

// Close stops the broker (SIGTERM, then SIGKILL after 30 s) and removes its data directory.
func (p *BrokerProcess) Close() error {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	return os.RemoveAll(p.dir)
}

// ProcessSluice starts a broker process (StartBrokerProcess) and returns a driver for it over
// transport, named "sluice-<transport>"; closing the driver stops the process and removes its
// data. The driver is a BrokerCPUReader. args go to the broker's serve command.
func ProcessSluice(ctx context.Context, exe, dir, transport string, logger *slog.Logger, args ...string) (Driver, error) {
	p, err := StartBrokerProcess(ctx, exe, dir, args...)
	if err != nil {
		return nil, err
	}
	addr, err := p.Addr(transport)
	if err == nil {
		var d *SluiceDriver
		if d, err = NewSluiceDriver(ctx, "sluice-"+transport, addr, logger); err == nil {
			return &processDriver{ownedDriver: ownedDriver{Driver: d, close: p.Close}, p: p}, nil
		}
	}
	return nil, errors.Join(err, p.Close())
}

// processDriver is a driver for a broker process it owns.
type processDriver struct {
	ownedDriver
	p *BrokerProcess
}

// BrokerCPU implements BrokerCPUReader.
func (d *processDriver) BrokerCPU() (time.Duration, bool) { return d.p.CPU() }

// BrokerRSSPeakMB implements BrokerCPUReader.
func (d *processDriver) BrokerRSSPeakMB() float64 { return d.p.RSSPeakMB() }
