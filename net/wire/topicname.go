package wire

import "fmt"

// MaxTopicNameLen is Kafka's limit on a topic name: the name must fit a file name with a
// partition suffix.
const MaxTopicNameLen = 249

// CheckTopicName reports why name is not a legal topic name (Kafka's rule: 1 to 249 of
// [a-zA-Z0-9._-], and not "." or ".."), or nil. The broker refuses such names
// (INVALID_TOPIC_EXCEPTION); clients check first, so that a producer or consumer given one
// fails at once instead of waiting for a topic that can never exist.
func CheckTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty name")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not allowed", name)
	case len(name) > MaxTopicNameLen:
		return fmt.Errorf("name is %d characters, more than %d", len(name), MaxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%q contains %q; only [a-zA-Z0-9._-] are allowed", name, c)
		}
	}
	return nil
}
