package broker

import (
	"bufio"
	"fmt"
	"github.com/sluicemq/sluice/internal/suggest"
	"io"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/cluster"
)

// ParseProperties reads Kafka-style "key=value" lines (# and ! comments) into c. It is
// ReadProperties without overrides, for callers that do not report the ignored keys.
func ParseProperties(r io.Reader, c *Config) error {
	_, err := ReadProperties(r, c)
	return err
}

// ReadProperties reads a Kafka-style properties file into c, then the overrides ("key=value",
// as kafka-server-start's --override), each of which replaces the file's lines of its key.
//
// A key Sluice knows is parsed by its registry entry (configkeys.go); a Kafka broker key that
// has no effect in Sluice (num.io.threads, ...; kafkaIgnored) is accepted and returned in
// ignored, sorted, for the caller to list once; any other key is an error with the closest
// known key ("did you mean"), so a typo does not silently keep a default. A malformed value is
// an error naming the key, the value and the line.
//
// Order: controller.listener.names first (listeners name it), then a property given in
// several units takes Kafka's order, whatever the file's: log.retention.ms over .minutes over
// .hours, log.roll.ms over .hours, and log.roll.jitter.ms over .hours; file order otherwise.
// The checks that tie keys together (the voters, the roles and the listeners; the heartbeat
// and the session timeout) run once every line is applied (checkCluster).
func ReadProperties(r io.Reader, c *Config, overrides ...string) (ignored []string, err error) {
	type entry struct {
		key, value string
		where      string // "line N" or "--override"
	}
	var entries []entry
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' || text[0] == '!' {
			continue
		}
		key, value, ok := cutProperty(text)
		if !ok {
			return nil, fmt.Errorf("config line %d: %q is not key=value", line, text)
		}
		entries = append(entries, entry{key, value, fmt.Sprintf("config line %d", line)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, o := range overrides {
		key, value, ok := cutProperty(strings.TrimSpace(o))
		if !ok || key == "" {
			return nil, fmt.Errorf("--override %q is not key=value", o)
		}
		entries = slices.DeleteFunc(entries, func(e entry) bool { return e.key == key })
		entries = append(entries, entry{key, value, "--override"})
	}
	// The coarser units first, so that the finer one, set later, wins; file order otherwise.
	rank := func(key string) int {
		switch {
		case key == "controller.listener.names":
			return -1
		case strings.HasSuffix(key, ".hours"):
			return 0
		case strings.HasSuffix(key, ".minutes"):
			return 1
		}
		return 2
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return rank(a.key) - rank(b.key) })
	given := make(map[string]string) // by registry name
	idKey := ""                      // node.id or broker.id, whichever set the id
	for _, e := range entries {
		if _, known := configByName[e.key]; !known && isKafkaIgnored(e.key) {
			ignored = append(ignored, e.key)
			continue
		}
		if err := c.Set(e.key, e.value); err != nil {
			return nil, fmt.Errorf("%s: %w", e.where, err)
		}
		name := configByName[e.key].Name
		if prev, twice := given[name]; twice && name == "node.id" && prev != e.value && e.key != idKey {
			// Kafka refuses node.id and broker.id that disagree; either alone is the id.
			return nil, fmt.Errorf("%s: %s=%s, but the node's id is already %s (node.id and broker.id are one property)", e.where, e.key, e.value, prev)
		}
		given[name] = e.value
		if name == "node.id" {
			idKey = e.key
		}
	}
	if err := c.checkCluster(given); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	slices.Sort(ignored)
	return slices.Compact(ignored), nil
}

// cutProperty splits key=value (or key:value, as Java's Properties), trimmed.
func cutProperty(text string) (key, value string, ok bool) {
	key, value, ok = strings.Cut(text, "=")
	if !ok {
		key, value, ok = strings.Cut(text, ":")
	}
	return strings.TrimSpace(key), strings.TrimSpace(value), ok
}

// Set applies one property through its registry entry (configkeys.go). A numeric value
// outside the property's range is refused with the range: Config's zero value means "unset",
// and withDefaults (broker.go) replaces a zero (or, for sizes and counts, a negative) field
// with the default, so a value let through here that withDefaults does not keep would
// silently become the default, and one it keeps that the broker cannot use would fail later
// (at startup, or in every produce). Set does not know the ignored Kafka keys
// (ReadProperties does): one set on its own is refused.
func (c *Config) Set(key, value string) error {
	d, ok := configByName[key]
	if !ok {
		return unknownProperty(key)
	}
	return d.set(c, prop{key: key, value: value})
}

// unknownProperty refuses key, suggesting the closest known key when one is close enough to
// be a typo of it, or the broker-wide form of a topic config.
func unknownProperty(key string) error {
	if key == "zookeeper.connect" {
		return fmt.Errorf("unknown property %q: ZooKeeper mode is not supported; Sluice runs as KRaft does (process.roles, controller.quorum.voters)", key)
	}
	if _, ok := cluster.LookupTopicConfig(key); ok {
		for _, d := range configDefs {
			if strings.HasSuffix(d.Name, "."+key) || d.Name == "log."+key {
				return fmt.Errorf("unknown property %q: it is a topic config; the broker-wide default is %s", key, d.Name)
			}
		}
		return fmt.Errorf("unknown property %q: it is a topic config (sluice topic create --config %s=...)", key, key)
	}
	if best, ok := closest(key, slices.Concat(configNames, kafkaIgnored)); ok {
		return fmt.Errorf("unknown property %q: did you mean %s?", key, best)
	}
	return fmt.Errorf("unknown property %q", key)
}

// closest is the candidate nearest to s by edit distance, when it is near enough to be a
// typo: at most a third of s's length, and at most 4 edits.
func closest(s string, candidates []string) (string, bool) {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := suggest.Distance(s, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best, bestD >= 0 && bestD <= min(4, max(1, len(s)/3))
}

// checkCluster is the checks that need the whole file: the voters against the node's id and
// roles and its controller listener, the heartbeat against the session timeout, the replica
// fetch wait against the replica lag time (checkReplicaFetch). given is the
// properties the file set, by registry name, with their values.
func (c *Config) checkCluster(given map[string]string) error {
	if c.HeartbeatInterval >= c.SessionTimeout && c.SessionTimeout > 0 {
		return fmt.Errorf("broker.session.timeout.ms %d must exceed broker.heartbeat.interval.ms %d: a broker would be fenced between two heartbeats",
			c.SessionTimeout.Milliseconds(), c.HeartbeatInterval.Milliseconds())
	}
	if err := c.checkReplicaFetch(); err != nil {
		return err
	}
	if _, ok := given["listeners"]; ok && c.Roles.Broker() && c.Listen == "" {
		return fmt.Errorf("listeners has no PLAINTEXT listener: process.roles %s serves clients and other brokers on it", c.Roles)
	}
	if len(c.Voters) == 0 {
		if bootstrap := given["controller.quorum.bootstrap.servers"]; len(splitList(bootstrap)) > 1 {
			return fmt.Errorf("controller.quorum.bootstrap.servers %q names %d controllers: Sluice's quorum is static; list it as controller.quorum.voters (id@host:port,...)", bootstrap, len(splitList(bootstrap)))
		}
		if !c.Roles.Controller() {
			return fmt.Errorf("process.roles=broker needs controller.quorum.voters: a broker-only node has no controller of its own")
		}
		return nil
	}
	voters := cluster.FormatVoters(c.Voters)
	if !c.NodeIDSet {
		return fmt.Errorf("node.id is not set: a node of the quorum controller.quorum.voters=%s needs its id", voters)
	}
	var me *cluster.Voter
	for i := range c.Voters {
		if c.Voters[i].ID == c.NodeID {
			me = &c.Voters[i]
		}
	}
	switch {
	case c.Roles.Controller() && me == nil:
		return fmt.Errorf("node.id %d is not in controller.quorum.voters %s, but process.roles %s makes it a controller", c.NodeID, voters, c.Roles)
	case !c.Roles.Controller() && me != nil:
		return fmt.Errorf("node.id %d is in controller.quorum.voters %s, but process.roles=%s gives it no vote (make it broker,controller, or take it out of the list)", c.NodeID, voters, c.Roles)
	case me == nil:
		return nil
	case c.ControllerListen == "":
		return fmt.Errorf("listeners has no %s listener: node %d is a controller, at %s in controller.quorum.voters",
			c.controllerListenerName(), c.NodeID, me.Addr())
	}
	// The host may differ (0.0.0.0 or an empty host listens where the voters' name points);
	// the port cannot, unless the voters name the advertised CONTROLLER address (a proxy in
	// front of the listener).
	if c.AdvertisedControllerListen != "" && c.AdvertisedControllerListen == me.Addr() {
		return nil
	}
	if _, port, _ := splitHostPort(c.ControllerListen); port != me.Port {
		return fmt.Errorf("listeners' %s://%s and controller.quorum.voters' %s disagree on node %d's port",
			c.controllerListenerName(), c.ControllerListen, me, c.NodeID)
	}
	return nil
}
