package cluster

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// checkVoters validates cfg.Voters against this node and its listener and returns the raft
// address this node advertises: its voter's host:port, or for a non-voter cfg.Advertised (or the
// listener's address).
func checkVoters(cfg Config) (string, error) {
	if cfg.Listener == nil {
		return "", fmt.Errorf("cluster: controller.quorum.voters %s needs a CONTROLLER listener on node %d", FormatVoters(cfg.Voters), cfg.NodeID)
	}
	if len(cfg.Voters) == 0 {
		return "", fmt.Errorf("cluster: controller.quorum.voters is empty")
	}
	for i, v := range cfg.Voters {
		for _, o := range cfg.Voters[:i] {
			if o.ID == v.ID {
				return "", fmt.Errorf("cluster: controller.quorum.voters %s: node id %d is named twice", FormatVoters(cfg.Voters), v.ID)
			}
		}
	}
	var self *Voter
	for i := range cfg.Voters {
		if cfg.Voters[i].ID == cfg.NodeID {
			self = &cfg.Voters[i]
		}
	}
	switch {
	case self == nil && !cfg.NonVoter:
		return "", fmt.Errorf("cluster: node %d has the controller role but controller.quorum.voters %s does not name it", cfg.NodeID, FormatVoters(cfg.Voters))
	case self != nil && cfg.NonVoter:
		return "", fmt.Errorf("cluster: node %d has only the broker role but controller.quorum.voters %s names it as a voter", cfg.NodeID, FormatVoters(cfg.Voters))
	case self == nil:
		if cfg.Advertised != "" {
			return cfg.Advertised, nil
		}
		return cfg.Listener.Addr().String(), nil
	}
	if cfg.Advertised != "" && cfg.Advertised == self.Addr() {
		return self.Addr(), nil
	}
	if !listensOn(cfg.Listener.Addr(), *self) {
		if cfg.Advertised != "" {
			return "", fmt.Errorf("cluster: controller.quorum.voters names node %d at %s, but its CONTROLLER listener is %s and it advertises %s", cfg.NodeID, self.Addr(), cfg.Listener.Addr(), cfg.Advertised)
		}
		return "", fmt.Errorf("cluster: controller.quorum.voters names node %d at %s, but its CONTROLLER listener is %s", cfg.NodeID, self.Addr(), cfg.Listener.Addr())
	}
	return self.Addr(), nil
}

// listensOn reports whether a listener bound to addr is reachable at v's address: the same
// port, and the same IP, a wildcard bind, or a host name that resolves to the bound IP.
func listensOn(addr net.Addr, v Voter) bool {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil || port != strconv.Itoa(v.Port) {
		return false
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.IsUnspecified() || strings.EqualFold(host, v.Host) {
		return true
	}
	if vip := net.ParseIP(v.Host); vip != nil {
		return vip.Equal(ip)
	}
	ips, err := net.LookupIP(v.Host)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(ips, ip.Equal)
}

// votersConfiguration is the raft configuration a fresh cluster bootstraps: every voter, its
// CONTROLLER address as its raft address. It is the same on every voter.
func votersConfiguration(vs []Voter) raft.Configuration {
	var cf raft.Configuration
	for _, v := range vs {
		cf.Servers = append(cf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(v.ID))), Address: raft.ServerAddress(v.Addr())})
	}
	return cf
}

// sameVoters refuses raft state whose voters differ from the configured ones; non-voters in
// the raft configuration (brokers the controller added) do not count.
func sameVoters(have raft.Configuration, want []Voter, dir string) error {
	var got []string
	for _, s := range have.Servers {
		if s.Suffrage == raft.Voter {
			got = append(got, string(s.ID)+"@"+string(s.Address))
		}
	}
	var exp []string
	for _, s := range votersConfiguration(want).Servers {
		exp = append(exp, string(s.ID)+"@"+string(s.Address))
	}
	slices.Sort(got)
	slices.Sort(exp)
	if !slices.Equal(got, exp) {
		return fmt.Errorf("cluster: controller.quorum.voters %s disagrees with the voters recorded in %s: %s (changing the quorum is not supported)",
			strings.Join(exp, ","), dir, strings.Join(got, ","))
	}
	return nil
}

// waitingLogEvery is how often Open says it is still waiting for the quorum.
const waitingLogEvery = 5 * time.Second

// readyQuorum waits until a leader is known and this node has applied the leader's commit index
// as the leader reported it (statusRPC), bounded by StartupTimeout. A non-voter asks the
// active controller to add it first (joinRPC), again until it hears from a leader.
func (c *Controller) readyQuorum() error {
	deadline := time.Now().Add(c.cfg.StartupTimeout)
	nextLog := time.Now().Add(time.Second)
	var lastErr error
	for {
		if c.closed.Load() {
			return ErrClosed
		}
		if err := c.store.appendsFailing(); err != nil {
			return fmt.Errorf("cluster: cannot write the raft log: %w (%w)", err, ErrNotLeader)
		}
		target, err := c.leaderCommitIndex()
		if err == nil {
			if c.appliedIndex() >= target {
				return nil
			}
		} else {
			lastErr = err
		}
		now := time.Now()
		if now.After(deadline) {
			if lastErr == nil {
				lastErr = fmt.Errorf("applied %d of %d", c.appliedIndex(), target)
			}
			return fmt.Errorf("cluster: no controller quorum after %v (voters %s): %w (%w)", c.cfg.StartupTimeout, FormatVoters(c.cfg.Voters), lastErr, ErrNotLeader)
		}
		if now.After(nextLog) {
			c.log.Info("waiting for the controller quorum", "voters", FormatVoters(c.cfg.Voters), "waited", time.Since(deadline.Add(-c.cfg.StartupTimeout)).Round(time.Second), "last", lastErr)
			nextLog = now.Add(waitingLogEvery)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-c.stop:
			return ErrClosed
		}
	}
}

// leaderCommitIndex is the leader's commit index: this node's own when it leads (after a Barrier,
// so that it covers every entry of earlier terms), else what the leader answers to a status RPC.
func (c *Controller) leaderCommitIndex() (uint64, error) {
	addr, id := c.raft.LeaderWithID()
	if id == c.self {
		if err := c.raft.Barrier(time.Second).Error(); err != nil {
			return 0, c.raftErr(err)
		}
		return c.raft.CommitIndex(), nil
	}
	ctx, cancel := contextWithTimeout(c.stop, time.Second)
	defer cancel()
	if id == "" {
		if c.cfg.NonVoter {
			c.join()
		}
		return 0, fmt.Errorf("no leader known: %w", ErrNotLeader)
	}
	resp, err := c.rpcc.call(ctx, string(addr), &rpcRequest{Op: opStatus})
	if err != nil {
		return 0, err
	}
	return resp.Index, nil
}

// join asks each voter in turn to add this non-voter (the one that leads does).
func (c *Controller) join() {
	for _, v := range c.cfg.Voters {
		ctx, cancel := contextWithTimeout(c.stop, 500*time.Millisecond)
		_, err := c.rpcc.call(ctx, v.Addr(), &rpcRequest{Op: opJoin, BrokerID: c.cfg.NodeID, Addr: c.addr})
		cancel()
		if err == nil {
			return
		}
	}
}
