package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/chaos/faultproxy"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/internal/localhost"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// ClusterConfig is the broker processes a run starts.
type ClusterConfig struct {
	Exe        string   // the sluice binary whose serve runs each broker
	Dir        string   // brokerN/ data directories, brokerN.properties, brokerN.log
	Brokers    int      // 3
	Properties []string // key=value for every broker, after the harness's own
	// PowerLoss runs every broker on vfs.PowerLossFS (serve --simulate-power-loss), so that
	// PowerCut can turn a kill into a power cut.
	PowerLoss bool
	LogLevel  string // the brokers' log level: info
}

// nodeState is where a broker process is in its life.
type nodeState int

const (
	stopped nodeState = iota
	running
	paused
)

// Node is one broker: its real listeners, the proxy fronts it advertises, its files and, while
// it runs, its process. Its fields past the files are the Cluster's mutex's.
type Node struct {
	ID                                       int32
	Listen, ControllerListen                 string // bound by the broker
	Advertised, AdvertisedController         string // the proxy's fronts, which everyone dials
	DataDir, PropsFile, LogFile, JournalFile string

	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned
	state  nodeState
}

// Cluster is the broker processes of a run and the fault proxy in front of them. Its mutex
// owns every Node's process fields; the methods that wait (for an exit, for readiness) do so
// without it.
type Cluster struct {
	cfg   ClusterConfig
	Proxy *faultproxy.Proxy
	nodes []*Node

	mu        sync.Mutex
	closeOnce sync.Once
}

// Harness properties: a short broker session so that a dead leader is replaced within seconds
// (the outage goal is session timeout + 1 s), and the defaults of everything durability rests
// on stated, not assumed.
var harnessProperties = []string{
	"broker.heartbeat.interval.ms=500",
	"broker.session.timeout.ms=3000",
	"replica.lag.time.max.ms=10000",
	"unclean.leader.election.enable=false",
	"auto.create.topics.enable=false",
	"storage.ballast.bytes=-1",
}

// StartCluster lays out the brokers, fronts each listener with the proxy and starts every
// broker; it returns once every broker answers a metadata request listing all of them. On an
// error every process it started is stopped.
func StartCluster(ctx context.Context, cfg ClusterConfig, readyTimeout time.Duration) (*Cluster, error) {
	if cfg.Brokers < 1 {
		cfg.Brokers = 3
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "info"
	}
	c := &Cluster{cfg: cfg, Proxy: faultproxy.New()}
	ports, err := localhost.FreePorts(2 * cfg.Brokers)
	if err != nil {
		_ = c.Proxy.Close()
		return nil, err
	}
	for i := range cfg.Brokers {
		name := "broker" + strconv.Itoa(i)
		n := &Node{
			ID:               int32(i),
			Listen:           net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i])),
			ControllerListen: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1])),
			DataDir:          filepath.Join(cfg.Dir, name),
			PropsFile:        filepath.Join(cfg.Dir, name+".properties"),
			LogFile:          filepath.Join(cfg.Dir, name+".log"),
			JournalFile:      filepath.Join(cfg.Dir, name+".powerloss"),
		}
		if n.Advertised, err = c.Proxy.Front(n.ID, n.Listen); err == nil {
			n.AdvertisedController, err = c.Proxy.Front(n.ID, n.ControllerListen)
		}
		if err != nil {
			_ = c.Proxy.Close()
			return nil, fmt.Errorf("chaos: fronting broker %d: %w", i, err)
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
			c.Close()
			return nil, err
		}
		if err := os.WriteFile(n.PropsFile, []byte(c.properties(n)), 0o644); err != nil {
			c.Close()
			return nil, err
		}
		if err := c.Start(n.ID); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitReady(ctx, readyTimeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// properties is node n's server.properties: it binds its real ports and advertises the
// proxy's, and the voters name the proxy's controller fronts, so that every connection
// between brokers, to the controllers and from clients passes the proxy.
func (c *Cluster) properties(n *Node) string {
	voters := make([]cluster.Voter, len(c.nodes))
	for i, m := range c.nodes {
		host, port, _ := net.SplitHostPort(m.AdvertisedController)
		p, _ := strconv.Atoi(port)
		voters[i] = cluster.Voter{ID: m.ID, Host: host, Port: p}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by `sluice chaos run`: broker %d of %d.\n", n.ID, len(c.nodes))
	fmt.Fprintf(&b, "node.id=%d\n", n.ID)
	b.WriteString("process.roles=broker,controller\n")
	fmt.Fprintf(&b, "listeners=PLAINTEXT://%s,CONTROLLER://%s\n", n.Listen, n.ControllerListen)
	fmt.Fprintf(&b, "advertised.listeners=PLAINTEXT://%s,CONTROLLER://%s\n", n.Advertised, n.AdvertisedController)
	b.WriteString("controller.listener.names=CONTROLLER\n")
	fmt.Fprintf(&b, "controller.quorum.voters=%s\n", cluster.FormatVoters(voters))
	fmt.Fprintf(&b, "log.dirs=%s\n", n.DataDir)
	for _, kv := range harnessProperties {
		b.WriteString(kv + "\n")
	}
	for _, kv := range c.cfg.Properties {
		b.WriteString(kv + "\n")
	}
	return b.String()
}

// Nodes are the brokers, by id.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Bootstrap is the proxy's client fronts.
func (c *Cluster) Bootstrap() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Advertised
	}
	return out
}

// DataDirs are the brokers' data directories, by id.
func (c *Cluster) DataDirs() map[int32]string {
	out := map[int32]string{}
	for _, n := range c.nodes {
		out[n.ID] = n.DataDir
	}
	return out
}

func (c *Cluster) node(id int32) (*Node, error) {
	if id < 0 || int(id) >= len(c.nodes) {
		return nil, fmt.Errorf("chaos: no broker %d", id)
	}
	return c.nodes[id], nil
}

// PID is broker id's process id, 0 while it is stopped.
func (c *Cluster) PID(id int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[id]; n.state != stopped {
		return n.cmd.Process.Pid
	}
	return 0
}

// Running reports whether broker id's process is up and not paused.
func (c *Cluster) Running(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id].state == running
}

// Up are the brokers whose processes run (paused ones included).
func (c *Cluster) Up() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	for _, n := range c.nodes {
		if n.state != stopped {
			out = append(out, n.ID)
		}
	}
	return out
}

// Start starts broker id's process (it must be stopped), its output appended to its log.
func (c *Cluster) Start(id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.state != stopped {
		return fmt.Errorf("chaos: broker %d is already running", id)
	}
	logf, err := os.OpenFile(n.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	args := []string{"serve", n.PropsFile, "--log-level", c.cfg.LogLevel}
	if c.cfg.PowerLoss {
		args = append(args, "--simulate-power-loss", n.JournalFile)
	}
	cmd := exec.Command(c.cfg.Exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: starting broker %d: %w", id, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	n.cmd, n.exited, n.state = cmd, exited, running
	c.Proxy.SetPID(id, cmd.Process.Pid)
	return nil
}

// signal sends sig to broker id's process if it has one; it returns the channel its exit
// closes.
func (c *Cluster) signal(id int32, sig syscall.Signal, next nodeState) (<-chan struct{}, error) {
	n, err := c.node(id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.state != stopped {
		select {
		case <-n.exited: // it died on its own: Crashed reports it
			return nil, fmt.Errorf("chaos: broker %d (pid %d) exited on its own", id, n.cmd.Process.Pid)
		default:
		}
	}
	if n.state == stopped {
		return nil, fmt.Errorf("chaos: broker %d is not running", id)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return nil, fmt.Errorf("chaos: signalling broker %d (pid %d): %w", id, n.cmd.Process.Pid, err)
	}
	n.state = next
	return n.exited, nil
}

// Kill kills broker id with SIGKILL and waits for its process to end.
func (c *Cluster) Kill(id int32) error {
	// A paused process dies of SIGKILL too.
	exited, err := c.signal(id, syscall.SIGKILL, stopped)
	if err != nil {
		return err
	}
	<-exited
	c.Proxy.SetPID(id, 0)
	return nil
}

// Term sends SIGTERM (a controlled shutdown) and waits up to timeout for the process to end;
// past it the process is killed and the error says so. It returns how long the stop took.
func (c *Cluster) Term(id int32, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	exited, err := c.signal(id, syscall.SIGTERM, stopped)
	if err != nil {
		return 0, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-exited:
		c.Proxy.SetPID(id, 0)
		return time.Since(start), nil
	case <-t.C:
	}
	// The node is already marked stopped (so Kill would refuse it): end its process here,
	// with SIGQUIT first, so that the Go runtime writes every goroutine's stack to its log
	// (where it hung), then SIGKILL.
	c.mu.Lock()
	proc := c.nodes[id].cmd.Process
	c.mu.Unlock()
	_ = proc.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = proc.Kill()
		<-exited
	}
	c.Proxy.SetPID(id, 0)
	return time.Since(start), fmt.Errorf("chaos: broker %d did not stop within %v of SIGTERM: killed (SIGQUIT first: its goroutines' stacks are in its log)", id, timeout)
}

// Pause stops broker id with SIGSTOP; Resume continues it.
func (c *Cluster) Pause(id int32) error {
	_, err := c.signal(id, syscall.SIGSTOP, paused)
	return err
}

// DumpStacks sends SIGUSR1 to every running broker: `sluice serve` writes every goroutine's
// stack to its log and goes on. It returns the logs written to, for the failure that asked.
func (c *Cluster) DumpStacks() []string {
	var logs []string
	for _, n := range c.nodes {
		if c.Running(n.ID) {
			if _, err := c.signal(n.ID, syscall.SIGUSR1, running); err == nil {
				logs = append(logs, n.LogFile)
			}
		}
	}
	return logs
}

// Resume sends SIGCONT to a paused broker.
func (c *Cluster) Resume(id int32) error {
	_, err := c.signal(id, syscall.SIGCONT, running)
	return err
}

// PowerCut kills broker id and rolls its files back to what a power cut would leave (the
// cluster must run with PowerLoss); opts.Rand set keeps a random prefix of the unsynced
// appends, torn if opts.TearLastPage.
func (c *Cluster) PowerCut(id int32, opts vfs.CrashOptions) (vfs.RollBackReport, error) {
	if !c.cfg.PowerLoss {
		return vfs.RollBackReport{}, errors.New("chaos: power cuts need brokers on the power-loss file layer")
	}
	if err := c.Kill(id); err != nil {
		return vfs.RollBackReport{}, err
	}
	return vfs.RollBack(c.nodes[id].JournalFile, opts)
}

// WaitReady waits until every running broker answers a metadata request that lists every
// broker, or timeout.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		last = nil
		for _, id := range c.Up() {
			n := c.nodes[id]
			select {
			case <-n.exited:
				return fmt.Errorf("chaos: broker %d exited; its log (%s) ends:\n%s", id, n.LogFile, localhost.LogTail(n.LogFile, 20))
			default:
			}
			md, err := metadata(ctx, n.Advertised, nil)
			if err == nil && len(md.Brokers) < len(c.nodes) {
				err = fmt.Errorf("broker %d knows %d of %d brokers", id, len(md.Brokers), len(c.nodes))
			}
			if err != nil {
				last = err
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("chaos: the cluster was not ready within %v: %w", timeout, last)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// metadata asks the broker at addr for the metadata of topics (nil: none).
func metadata(ctx context.Context, addr string, topics []string) (*wire.MetadataResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, addr, "sluice-chaos")
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if topics == nil {
		topics = []string{}
	}
	var md wire.MetadataResponse
	if err := cl.Call(ctx, &wire.MetadataRequest{Topics: topics}, &md); err != nil {
		return nil, err
	}
	return &md, nil
}

// Metadata asks the running brokers in turn for the topics' metadata; the first answer with
// a controller wins.
func (c *Cluster) Metadata(ctx context.Context, topics []string) (*wire.MetadataResponse, error) {
	var last error = errors.New("chaos: no broker is running")
	for _, id := range c.Up() {
		if !c.Running(id) {
			continue
		}
		md, err := metadata(ctx, c.nodes[id].Advertised, topics)
		if err == nil && md.ControllerID < 0 {
			err = fmt.Errorf("broker %d knows no active controller", id)
		}
		if err == nil {
			return md, nil
		}
		last = err
	}
	return nil, last
}

// Close stops every broker still running (a paused one continued first) with SIGTERM, kills
// those left after 30 s, and closes the proxy.
func (c *Cluster) Close() error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, id := range c.Up() {
		if !c.Running(id) {
			_ = c.Resume(id)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Term(id, 30*time.Second); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.closeOnce.Do(func() { errs = append(errs, c.Proxy.Close()) })
	return errors.Join(errs...)
}

// sortedIDs returns ids sorted.
func sortedIDs(ids []int32) []int32 {
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Crashed lists the brokers whose process exited while the harness thought it running or
// paused, and marks them stopped.
func (c *Cluster) Crashed() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	for _, n := range c.nodes {
		if n.state == stopped {
			continue
		}
		select {
		case <-n.exited:
			n.state = stopped
			c.Proxy.SetPID(n.ID, 0)
			out = append(out, n.ID)
		default:
		}
	}
	return out
}
