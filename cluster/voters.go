package cluster

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Voter is one member of the controller quorum, as controller.quorum.voters names it: the node
// id and the address of its CONTROLLER listener, which carries raft and the controller's RPCs.
type Voter struct {
	ID   int32
	Host string
	Port int
}

// Addr is host:port.
func (v Voter) Addr() string { return net.JoinHostPort(v.Host, strconv.Itoa(v.Port)) }

// String is KRaft's form, id@host:port.
func (v Voter) String() string { return fmt.Sprintf("%d@%s", v.ID, v.Addr()) }

// FormatVoters is the inverse of ParseVoters.
func FormatVoters(vs []Voter) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, ",")
}

// ParseVoters parses controller.quorum.voters, KRaft's
// "0@127.0.0.1:9093,1@127.0.0.1:9193,2@127.0.0.1:9293". It refuses an empty list, an entry
// that does not parse, a negative id or a port outside 1..65535, and an id or address named
// twice, each with a message naming the entry. The result is sorted by id.
func ParseVoters(s string) ([]Voter, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("controller.quorum.voters: empty: want id@host:port[,id@host:port...]")
	}
	var out []Voter
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		idText, addr, ok := strings.Cut(entry, "@")
		if !ok {
			return nil, fmt.Errorf("controller.quorum.voters: %q: want id@host:port", entry)
		}
		id, err := strconv.ParseInt(idText, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("controller.quorum.voters: %q: node id %q is not a number from 0", entry, idText)
		}
		host, portText, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("controller.quorum.voters: %q: %v", entry, err)
		}
		port, err := strconv.Atoi(portText)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("controller.quorum.voters: %q: port %q is not in 1..65535", entry, portText)
		}
		if host == "" {
			return nil, fmt.Errorf("controller.quorum.voters: %q: no host", entry)
		}
		v := Voter{ID: int32(id), Host: host, Port: port}
		for _, o := range out {
			if o.ID == v.ID {
				return nil, fmt.Errorf("controller.quorum.voters: node id %d is named twice (%s and %s)", v.ID, o, v)
			}
			if o.Addr() == v.Addr() {
				return nil, fmt.Errorf("controller.quorum.voters: address %s is named twice (%s and %s)", v.Addr(), o, v)
			}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b Voter) int { return int(a.ID) - int(b.ID) })
	return out, nil
}
