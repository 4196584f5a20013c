package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Dynamic broker configs (Kafka's AlterConfigs/IncrementalAlterConfigs on a
// BROKER resource): kept in the metadata, so every broker reads them from its
// own copy. Broker "" holds the cluster-wide defaults, "N" broker N's
// overrides (N need not be registered yet). Only the replication throttles
// are dynamic here.

// The dynamic broker config keys, with Kafka's names: bytes per second, a long ≥ 0; absent
// or 0 means no throttle.
const (
	// LeaderReplicationThrottledRate caps what a leader sends per second to the replicas
	// that are catching up in a move (the adding replicas).
	LeaderReplicationThrottledRate = "leader.replication.throttled.rate"
	// FollowerReplicationThrottledRate caps what a follower that is catching up in a move
	// fetches per second.
	FollowerReplicationThrottledRate = "follower.replication.throttled.rate"
)

// maxBrokerConfigs bounds how many brokers may have overrides (one command cannot make every
// controller allocate without limit, and neither can many).
const maxBrokerConfigs = 100_000

// ValidateBrokerConfig checks one dynamic broker config. Errors wrap ErrInvalidConfig and
// name the key.
func ValidateBrokerConfig(key, value string) error {
	switch key {
	case LeaderReplicationThrottledRate, FollowerReplicationThrottledRate:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: %s=%q: want a whole number of bytes per second ≥ 0", ErrInvalidConfig, key, value)
		}
		return nil
	}
	return fmt.Errorf("%w: %q is not a dynamic broker config (only %s and %s are)", ErrInvalidConfig, key,
		LeaderReplicationThrottledRate, FollowerReplicationThrottledRate)
}

// checkBrokerResource checks a broker config resource name: "" (the cluster default) or a
// broker id in its plain decimal form.
func checkBrokerResource(broker string) error {
	if broker == "" {
		return nil
	}
	n, err := strconv.ParseInt(broker, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != broker {
		return fmt.Errorf("%w: broker %q: want a broker id, or \"\" for the cluster default", ErrInvalidConfig, broker)
	}
	return nil
}

// BrokerConfigs returns a copy of the dynamic configs of broker ("" the cluster default, "N"
// broker N), or nil if it has none.
func (m *Metadata) BrokerConfigs(broker string) map[string]string {
	return maps.Clone(m.brokerConfigs[broker])
}

// ThrottleRate is the throttle key (LeaderReplicationThrottledRate or
// FollowerReplicationThrottledRate) in effect on broker: its own, else the cluster default,
// else 0 (no throttle).
func (m *Metadata) ThrottleRate(broker int32, key string) int64 {
	for _, res := range []string{strconv.Itoa(int(broker)), ""} {
		if v, ok := m.brokerConfigs[res][key]; ok {
			n, _ := strconv.ParseInt(v, 10, 64) // validated by Apply and Restore
			return n
		}
	}
	return 0
}

type alterBrokerConfigsCmd struct {
	Broker string            `json:"broker"`
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

func (c *alterBrokerConfigsCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	configs, err := c.build(m)
	if err != nil {
		return m, applyResult{Err: fmt.Errorf("alter configs of broker %q: %w", c.Broker, err)}
	}
	if maps.Equal(configs, m.brokerConfigs[c.Broker]) {
		return m, applyResult{}
	}
	next := m.clone()
	if len(configs) == 0 {
		delete(next.brokerConfigs, c.Broker)
	} else {
		next.brokerConfigs[c.Broker] = configs
	}
	return next.finish(index), applyResult{}
}

func (c *alterBrokerConfigsCmd) build(m *Metadata) (map[string]string, error) {
	if err := checkBrokerResource(c.Broker); err != nil {
		return nil, err
	}
	// Sorted, so that the first bad key reported is the same on every node.
	for _, k := range slices.Sorted(maps.Keys(c.Set)) {
		if err := ValidateBrokerConfig(k, c.Set[k]); err != nil {
			return nil, err
		}
	}
	configs := maps.Clone(m.brokerConfigs[c.Broker])
	if configs == nil {
		configs = map[string]string{}
	}
	maps.Copy(configs, c.Set)
	for _, k := range c.Delete {
		if err := ValidateBrokerConfig(k, "0"); err != nil {
			return nil, err
		}
		if _, ok := c.Set[k]; ok {
			return nil, fmt.Errorf("%w: %q is both set and deleted", ErrInvalidConfig, k)
		}
		delete(configs, k)
	}
	if _, ok := m.brokerConfigs[c.Broker]; !ok && len(configs) > 0 && len(m.brokerConfigs) >= maxBrokerConfigs {
		return nil, fmt.Errorf("%w: %d brokers have dynamic configs already", ErrInvalidConfig, len(m.brokerConfigs))
	}
	return configs, nil
}

// checkBrokerConfigs verifies a snapshot's dynamic broker configs.
func checkBrokerConfigs(all map[string]map[string]string) error {
	if len(all) > maxBrokerConfigs {
		return fmt.Errorf("dynamic configs of %d brokers", len(all))
	}
	for broker, configs := range all {
		if err := checkBrokerResource(broker); err != nil {
			return err
		}
		if len(configs) == 0 {
			return fmt.Errorf("broker %q: empty configs", broker)
		}
		for k, v := range configs {
			if err := ValidateBrokerConfig(k, v); err != nil {
				return fmt.Errorf("broker %q: %w", broker, err)
			}
		}
	}
	return nil
}
