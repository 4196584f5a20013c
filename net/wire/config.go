package wire

import "strconv"

// Types shared by CreateTopics, DescribeConfigs and AlterConfigs.

// ConfigEntry is one configuration setting, e.g. {"retention.ms", "3600000"}.
// Configs are arrays, not maps, so encoding is deterministic and a broker can
// reject a name given twice (ErrInvalidRequest) instead of silently keeping
// one of them.
type ConfigEntry struct {
	Name  string
	Value *string // nil = null: in AlterConfigs, back to the default
}

const minConfigEntry = sizeString * 2

func (c *ConfigEntry) appendTo(dst []byte) []byte {
	dst = appendString(dst, c.Name)
	return appendNullableString(dst, c.Value)
}

func (c *ConfigEntry) readFrom(r *reader) {
	c.Name = r.stringReuse(c.Name)
	c.Value = r.nullableString()
}

// ResourceType says what a DescribeConfigs or AlterConfigs resource names.
// The numbers are Kafka's.
type ResourceType int8

// Resource types.
const (
	ResourceUnknown ResourceType = 0
	ResourceTopic   ResourceType = 2
	ResourceBroker  ResourceType = 4 // ResourceName is the broker id in decimal, "" for the cluster default
)

// ConfigSource says where a described config value comes from. The numbers
// are Kafka's.
type ConfigSource int8

// Config sources.
const (
	ConfigSourceUnknown              ConfigSource = 0
	ConfigSourceDynamicTopic         ConfigSource = 1 // set on the topic (CreateTopics or AlterConfigs)
	ConfigSourceDynamicBroker        ConfigSource = 2
	ConfigSourceDynamicDefaultBroker ConfigSource = 3
	ConfigSourceStaticBroker         ConfigSource = 4 // from the broker's configuration file or flags
	ConfigSourceDefault              ConfigSource = 5 // built-in default
)

// String returns Kafka's name of the source (DescribeConfigsResult's), so that a printed entry
// says where its value came from rather than a number.
func (s ConfigSource) String() string {
	switch s {
	case ConfigSourceDynamicTopic:
		return "DYNAMIC_TOPIC_CONFIG"
	case ConfigSourceDynamicBroker:
		return "DYNAMIC_BROKER_CONFIG"
	case ConfigSourceDynamicDefaultBroker:
		return "DYNAMIC_DEFAULT_BROKER_CONFIG"
	case ConfigSourceStaticBroker:
		return "STATIC_BROKER_CONFIG"
	case ConfigSourceDefault:
		return "DEFAULT_CONFIG"
	case ConfigSourceUnknown:
		return "UNKNOWN"
	}
	return "ConfigSource(" + strconv.Itoa(int(s)) + ")"
}
