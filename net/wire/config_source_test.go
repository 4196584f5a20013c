package wire

import "testing"

func TestConfigSourceString(t *testing.T) {
	for s, want := range map[ConfigSource]string{
		ConfigSourceUnknown: "UNKNOWN", ConfigSourceDynamicTopic: "DYNAMIC_TOPIC_CONFIG",
		ConfigSourceDynamicBroker: "DYNAMIC_BROKER_CONFIG", ConfigSourceDynamicDefaultBroker: "DYNAMIC_DEFAULT_BROKER_CONFIG",
		ConfigSourceStaticBroker: "STATIC_BROKER_CONFIG", ConfigSourceDefault: "DEFAULT_CONFIG", ConfigSource(9): "ConfigSource(9)",
	} {
		if got := s.String(); got != want {
			t.Errorf("%d: %q, want %q", int8(s), got, want)
		}
	}
}
