package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/internal/localhost"
	"github.com/sluicemq/sluice/net/wire"
)

// localClusterOptions are `cluster local`'s flags.
type localClusterOptions struct {
	brokers      int
	dataDir      string
	basePort     int
	props        []string // server properties for every node
	logLevel     string
	readyTimeout time.Duration
	stopTimeout  time.Duration
}

func clusterLocalCmd() *cobra.Command {
	var o localClusterOptions
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run a cluster of broker processes on this host until Ctrl-C",
		Long: `Start --brokers broker processes (this binary's serve) on this host, each a voter of the
controller quorum (process.roles=broker,controller), print the bootstrap list, each node's pid,
data directory and log file, and wait; Ctrl-C or SIGTERM stops them all (SIGTERM to each, then
SIGKILL after --stop-timeout) and exits.

Node i has node.id=i, its PLAINTEXT listener on 127.0.0.1:<base-port + 100i> and its CONTROLLER
listener on the next port (9092 and 9093, 9192 and 9193, ... by default), its data in
<data-dir>/broker<i> (with its unix socket), its properties in <data-dir>/broker<i>.properties
and its log in <data-dir>/broker<i>.log. --base-port 0 takes free ports. --property adds a
server property to every node (broker.session.timeout.ms=2000, ...). A data directory used
before is reused: the cluster restarts with its data.

"cluster ready" is printed once every broker answers a metadata request listing all of them.`,
		Args: noArgs(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runLocalCluster(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.brokers, "brokers", 3, "number of broker processes (each also a controller voter)")
	f.StringVar(&o.dataDir, "data-dir", "sluice-cluster", "directory for the nodes' data directories, properties and logs")
	f.IntVar(&o.basePort, "base-port", 9092, "node i listens on base-port+100i (PLAINTEXT) and the next port (CONTROLLER); 0 picks free ports")
	f.StringArrayVar(&o.props, "property", nil, "a server property `key=value` for every node (repeatable)")
	f.StringVar(&o.logLevel, "log-level", "info", "the brokers' log level: debug, info, warn or error")
	f.DurationVar(&o.readyTimeout, "ready-timeout", 60*time.Second, "how long to wait for every broker to answer")
	f.DurationVar(&o.stopTimeout, "stop-timeout", 30*time.Second, "how long a broker may take to stop after SIGTERM before it is killed")
	return cmd
}

// localNode is one broker process of a local cluster.
type localNode struct {
	id                 int
	listen, controller string // host:port
	dataDir, props     string
	logFile            string
	cmd                *exec.Cmd
	exited             chan struct{} // closed once cmd.Wait returned
	waitErr            error         // cmd.Wait's error, set before exited closes
}

// localCluster is the broker processes `cluster local` started. stop stops every one still
// running; it is the only way they end but for dying on their own.
type localCluster struct {
	nodes []*localNode
}

// planLocalCluster lays out the nodes: ports, directories, files.
func planLocalCluster(o localClusterOptions) ([]*localNode, error) {
	if o.brokers < 1 || o.brokers > 99 {
		return nil, fmt.Errorf("--brokers %d: want 1 to 99", o.brokers)
	}
	if o.basePort < 0 || o.basePort > 65535-100*(o.brokers-1)-1 {
		return nil, fmt.Errorf("--base-port %d: node %d's ports would be past 65535 (want 0 for free ports, or a lower port)", o.basePort, o.brokers-1)
	}
	dir, err := filepath.Abs(o.dataDir)
	if err != nil {
		return nil, err
	}
	var free []int
	if o.basePort == 0 {
		if free, err = localhost.FreePorts(2 * o.brokers); err != nil {
			return nil, err
		}
	}
	nodes := make([]*localNode, o.brokers)
	for i := range nodes {
		port, ctrl := o.basePort+100*i, o.basePort+100*i+1
		if free != nil {
			port, ctrl = free[2*i], free[2*i+1]
		}
		name := "broker" + strconv.Itoa(i)
		nodes[i] = &localNode{
			id:         i,
			listen:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			controller: net.JoinHostPort("127.0.0.1", strconv.Itoa(ctrl)),
			dataDir:    filepath.Join(dir, name),
			props:      filepath.Join(dir, name+".properties"),
			logFile:    filepath.Join(dir, name+".log"),
			exited:     make(chan struct{}),
		}
	}
	return nodes, nil
}

// serverProperties is node n's properties file, with Kafka's KRaft key names.
func serverProperties(n *localNode, nodes []*localNode, extra []string) string {
	voters := make([]cluster.Voter, len(nodes))
	for i, m := range nodes {
		host, port, _ := net.SplitHostPort(m.controller)
		p, _ := strconv.Atoi(port)
		voters[i] = cluster.Voter{ID: int32(m.id), Host: host, Port: p}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by `sluice cluster local`: node %d of %d. Rewritten at every start.\n", n.id, len(nodes))
	fmt.Fprintf(&b, "node.id=%d\n", n.id)
	b.WriteString("process.roles=broker,controller\n")
	fmt.Fprintf(&b, "listeners=PLAINTEXT://%s,CONTROLLER://%s\n", n.listen, n.controller)
	b.WriteString("controller.listener.names=CONTROLLER\n")
	fmt.Fprintf(&b, "controller.quorum.voters=%s\n", cluster.FormatVoters(voters))
	fmt.Fprintf(&b, "log.dirs=%s\n", n.dataDir)
	for _, kv := range extra {
		b.WriteString(kv + "\n")
	}
	return b.String()
}

// checkServerProperties refuses --property values that are not key=value, or that set what
// cluster local lays out itself.
func checkServerProperties(props []string) error {
	for _, kv := range props {
		k, _, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("--property %q: want key=value", kv)
		}
		switch k {
		case "node.id", "broker.id", "process.roles", "listeners", "controller.listener.names", "controller.quorum.voters", "log.dirs", "log.dir":
			return fmt.Errorf("--property %s: cluster local sets it for each node (see --help)", k)
		}
	}
	return nil
}

func runLocalCluster(ctx context.Context, o localClusterOptions, stdout, stderr io.Writer) error {
	if err := checkServerProperties(o.props); err != nil {
		return err
	}
	nodes, err := planLocalCluster(o)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary to run its serve: %w", err)
	}
	lc := &localCluster{}
	defer func() {
		if err := lc.stop(o.stopTimeout, stdout); err != nil {
			fmt.Fprintln(stderr, "sluice cluster local:", err)
		}
	}()
	for _, n := range nodes {
		if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(n.props, []byte(serverProperties(n, nodes, o.props)), 0o644); err != nil {
			return err
		}
		if err := lc.start(exe, n, o.logLevel); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "node %d: pid=%d listener=%s controller=%s data=%s log=%s\n",
			n.id, n.cmd.Process.Pid, n.listen, n.controller, n.dataDir, n.logFile)
	}
	bootstrap := make([]string, len(nodes))
	for i, n := range nodes {
		bootstrap[i] = n.listen
	}
	fmt.Fprintf(stdout, "bootstrap.servers=%s\n", strings.Join(bootstrap, ","))
	if err := waitLocalClusterReady(ctx, nodes, o.readyTimeout); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "cluster ready (Ctrl-C stops it)")
	// Until interrupted; a broker that dies is reported, and the others keep running (a test
	// or a benchmark kills one on purpose).
	var wg sync.WaitGroup
	done := make(chan struct{})
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-n.exited:
				fmt.Fprintf(stdout, "node %d (pid %d) exited: %v\n", n.id, n.cmd.Process.Pid, exitDescription(n.waitErr))
			case <-done:
			}
		}()
	}
	<-ctx.Done()
	close(done)
	wg.Wait()
	return nil
}

// start runs node n's broker, its output appended to its log file.
func (lc *localCluster) start(exe string, n *localNode, logLevel string) error {
	logf, err := os.OpenFile(n.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	n.cmd = exec.Command(exe, "serve", n.props, "--log-level", logLevel)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("node %d: %w", n.id, err)
	}
	lc.nodes = append(lc.nodes, n)
	go func() {
		n.waitErr = n.cmd.Wait()
		close(n.exited)
	}()
	return nil
}

// stop sends SIGTERM to every broker still running, waits up to timeout for them (together),
// and kills those left.
func (lc *localCluster) stop(timeout time.Duration, out io.Writer) error {
	for _, n := range lc.nodes {
		select {
		case <-n.exited:
		default:
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var killed []string
	for _, n := range lc.nodes {
		select {
		case <-n.exited:
		case <-deadline.C:
			deadline.Reset(0) // the bound is for all: the next ones are killed at once
			killed = append(killed, strconv.Itoa(n.id))
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
	}
	if len(lc.nodes) > 0 {
		fmt.Fprintf(out, "stopped %d brokers\n", len(lc.nodes))
	}
	if len(killed) > 0 {
		return fmt.Errorf("nodes %s did not stop within %v of SIGTERM: killed", strings.Join(killed, ","), timeout)
	}
	return nil
}

// waitLocalClusterReady polls each broker with a metadata request until every one answers
// listing all the nodes, or a broker process exits, or timeout.
func waitLocalClusterReady(ctx context.Context, nodes []*localNode, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ready := make([]bool, len(nodes))
	var last error
	for {
		all := true
		for i, n := range nodes {
			select {
			case <-n.exited:
				return fmt.Errorf("node %d exited before the cluster was ready: %v; its log (%s) ends:\n%s",
					n.id, exitDescription(n.waitErr), n.logFile, localhost.LogTail(n.logFile, 20))
			default:
			}
			if ready[i] {
				continue
			}
			ids, err := metadataBrokers(ctx, n.listen)
			if err == nil && len(ids) < len(nodes) {
				err = fmt.Errorf("node %d knows brokers %v of %d", n.id, ids, len(nodes))
			}
			if err != nil {
				last, all = err, false
				continue
			}
			ready[i] = true
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return errors.New("interrupted before the cluster was ready")
			}
			return fmt.Errorf("the cluster was not ready within %v: %w", timeout, last)
		case <-tick.C:
		}
	}
}

// metadataBrokers asks the broker at addr for metadata and returns the broker ids it lists.
func metadataBrokers(ctx context.Context, addr string) ([]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, "sluice-cluster-local")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var md wire.MetadataResponse
	if err := c.Call(ctx, &wire.MetadataRequest{Topics: []string{}}, &md); err != nil {
		return nil, err
	}
	ids := make([]int32, len(md.Brokers))
	for i, b := range md.Brokers {
		ids[i] = b.NodeID
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// exitDescription says how a broker process ended.
func exitDescription(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.String()
	}
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
