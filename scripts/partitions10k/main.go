// Command partitions10k measures one broker hosting many partitions (issue 21, "Frugal
// partitions"): it starts a real `sluice serve`, creates the partitions, samples the process's
// RSS, open files and idle CPU, then kills it (SIGKILL, then SIGTERM) and times each restart to
// the first metadata answer and to every partition answering ListOffsets. Every process it
// starts it stops by its pid, and every wait is bounded. Linux only (it reads /proc).
//
//	go build -o /tmp/sluice ./cmd/sluice
//	(ulimit -n 20000 && go run ./scripts/partitions10k -bin /tmp/sluice -topics 100 -partitions 100)
//
// scripts/partitions-10k.sh does both.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/client"
)

func main() {
	bin := flag.String("bin", "sluice", "the sluice binary")
	dir := flag.String("dir", "", "data directory (default: a new temporary one, removed at the end)")
	topics := flag.Int("topics", 100, "topics to create")
	parts := flag.Int("partitions", 100, "partitions per topic")
	idle := flag.Duration("idle", 60*time.Second, "how long to sample idle CPU")
	records := flag.Int("records", 0, "records (100 B, acks=1: kill -9 keeps the page cache) written to every partition after creation, so that the restarts recover data; each restart checks every partition's end offset")
	deadline := flag.Duration("deadline", 20*time.Minute, "give up after this long")
	flag.Parse()
	r := &run{bin: *bin, dir: *dir, topics: *topics, parts: *parts, records: *records, stopAt: time.Now().Add(*deadline)}
	if r.dir == "" {
		d, err := os.MkdirTemp("", "partitions10k-")
		if err != nil {
			fatal(err)
		}
		r.dir = d
		defer os.RemoveAll(d)
	}
	err := r.main(*idle)
	r.stop(syscall.SIGKILL)
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "partitions10k:", err)
	os.Exit(1)
}

type run struct {
	bin           string
	dir           string
	topics, parts int
	records       int
	stopAt        time.Time
	addr          string
	cmd           *exec.Cmd
	started       time.Time
	exited        chan error
}

func (r *run) main(idle time.Duration) error {
	var rl syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	fmt.Printf("partitions: %d topics x %d = %d; RLIMIT_NOFILE %d; data %s\n", r.topics, r.parts, r.topics*r.parts, rl.Cur, r.dir)
	if err := r.start(); err != nil {
		return err
	}
	if _, err := r.waitMetadata(); err != nil {
		return err
	}
	t0 := time.Now()
	if err := r.create(); err != nil {
		return err
	}
	fmt.Printf("create: %.1f s\n", time.Since(t0).Seconds())
	if r.records > 0 {
		t0 = time.Now()
		if err := r.produce(); err != nil {
			return err
		}
		fmt.Printf("produce: %d records of 100 B to each partition, acks=1: %.1f s\n", r.records, time.Since(t0).Seconds())
	}
	if err := r.waitServed(); err != nil {
		return err
	}
	r.sample("after create", idle)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		if err := r.stop(sig); err != nil {
			return err
		}
		if err := r.start(); err != nil {
			return err
		}
		md, err := r.waitMetadata()
		if err != nil {
			return err
		}
		if err := r.waitServed(); err != nil {
			return err
		}
		fmt.Printf("restart after %v: first metadata answer %.2f s, every partition served %.2f s\n", sig, md.Seconds(), time.Since(r.started).Seconds())
		r.sample("after restart ("+sig.String()+")", 0)
	}
	return r.stop(syscall.SIGTERM)
}

func (r *run) start() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r.addr = l.Addr().String()
	_ = l.Close()
	logf, err := os.OpenFile(filepath.Join(r.dir, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	r.cmd = exec.Command(r.bin, "serve", "--data-dir", filepath.Join(r.dir, "data"), "--listen", r.addr, "--unix", "-", "--log-level", "warn")
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.started = time.Now()
	if err := r.cmd.Start(); err != nil {
		return err
	}
	r.exited = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(r.cmd, r.exited)
	return nil
}

// stop sends sig to the broker by its pid and waits (at most 60 s, then SIGKILL) for it.
func (r *run) stop(sig syscall.Signal) error {
	if r.cmd == nil {
		return nil
	}
	defer func() { r.cmd = nil }()
	t0 := time.Now()
	_ = r.cmd.Process.Signal(sig)
	select {
	case err := <-r.exited:
		if sig == syscall.SIGTERM && err != nil {
			return fmt.Errorf("broker exited after SIGTERM: %w (see %s)", err, filepath.Join(r.dir, "serve.log"))
		}
		if sig == syscall.SIGTERM {
			fmt.Printf("SIGTERM: exited 0 after %.2f s\n", time.Since(t0).Seconds())
		}
		return nil
	case <-time.After(60 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
		return errors.New("broker did not stop within 60 s of " + sig.String())
	}
}

func (r *run) admin(timeout time.Duration) (*client.Admin, context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	a, err := client.NewAdmin(ctx, r.addr)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return a, ctx, cancel, nil
}

// waitMetadata polls for the first Metadata answer; it returns the time since the start.
func (r *run) waitMetadata() (time.Duration, error) {
	for time.Now().Before(r.stopAt) {
		select {
		case err := <-r.exited:
			return 0, fmt.Errorf("broker exited: %v", err)
		default:
		}
		if a, ctx, cancel, err := r.admin(time.Second); err == nil {
			_, err = a.ListTopics(ctx)
			_ = a.Close()
			cancel()
			if err == nil {
				return time.Since(r.started), nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, errors.New("no metadata answer before the deadline")
}

func (r *run) create() error {
	a, ctx, cancel, err := r.admin(time.Until(r.stopAt))
	if err != nil {
		return err
	}
	defer cancel()
	defer a.Close()
	for i := range r.topics {
		if err := a.CreateTopic(ctx, client.TopicSpec{Name: topicName(i), Partitions: int32(r.parts), ReplicationFactor: 1}); err != nil {
			return fmt.Errorf("after %d topics: %w", i, err)
		}
	}
	return nil
}

func topicName(i int) string { return fmt.Sprintf("p10k-%03d", i) }

// produce writes r.records records to every partition with acks=1 and waits for them (with
// acks=all, 10,000 partitions' fsyncs outlast request.timeout.ms on this machine's disk, and the
// producer's retries, not idempotent yet, duplicate records).
func (r *run) produce() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Until(r.stopAt))
	defer cancel()
	p, err := client.NewProducer(ctx, client.ProducerConfig{Config: client.Config{Brokers: []string{r.addr}}, Acks: client.AcksLeader})
	if err != nil {
		return err
	}
	defer p.Close(context.Background())
	var mu sync.Mutex
	var first error
	value := make([]byte, 100)
	for i := range r.topics {
		for part := range r.parts {
			for range r.records {
				p.Send(ctx, &client.Record{Topic: topicName(i), Partition: int32(part), PartitionSet: true, Value: value}, func(_ client.RecordMetadata, err error) {
					if err != nil {
						mu.Lock()
						first = cmp.Or(first, err)
						mu.Unlock()
					}
				})
			}
		}
	}
	if err := p.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return first
}

// waitServed polls until one ListOffsets of every partition answers without an error (and,
// with -records, with every acknowledged record there: at least that many).
func (r *run) waitServed() error {
	specs := map[client.TopicPartition]client.OffsetSpec{}
	for i := range r.topics {
		for p := range r.parts {
			specs[client.TopicPartition{Topic: topicName(i), Partition: int32(p)}] = client.OffsetLatest
		}
	}
	var last error
	for time.Now().Before(r.stopAt) {
		a, ctx, cancel, err := r.admin(10 * time.Second)
		if err == nil {
			var got map[client.TopicPartition]client.ListedOffset
			got, err = a.ListOffsets(ctx, specs)
			_ = a.Close()
			cancel()
			if err == nil {
				for tp, o := range got {
					if o.Offset < int64(r.records) {
						return fmt.Errorf("%s-%d ends at %d after the restart, below the %d acknowledged", tp.Topic, tp.Partition, o.Offset, r.records)
					}
				}
				return nil
			}
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not every partition served before the deadline: %.300v", last)
}

// sample prints RSS and open files, and the CPU used over idle (skipped when 0).
func (r *run) sample(what string, idle time.Duration) {
	pid := r.cmd.Process.Pid
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	fmt.Printf("%s: RSS %d MiB, open files %d\n", what, rssKiB(pid)>>10, len(fds))
	if idle <= 0 {
		return
	}
	c0, t0 := cpuTicks(pid), time.Now()
	time.Sleep(idle)
	c1, t1 := cpuTicks(pid), time.Now()
	const hz = 100 // USER_HZ
	fmt.Printf("%s: idle CPU %.2f %% of a core over %.0f s; RSS %d MiB\n", what,
		100*float64(c1-c0)/hz/t1.Sub(t0).Seconds(), t1.Sub(t0).Seconds(), rssKiB(pid)>>10)
}

func rssKiB(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return -1
}

// cpuTicks is utime+stime from /proc/PID/stat, in clock ticks.
func cpuTicks(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}
