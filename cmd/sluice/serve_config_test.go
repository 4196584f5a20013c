package main

import (
	"slices"
	"strings"
	"testing"
)

// TestLoadConfig: serve takes a Kafka KRaft quick start's server.properties whole, returns the
// Kafka keys with no effect for its one log line, and --override replaces the file's keys.
func TestLoadConfig(t *testing.T) {
	cfg, ignored, err := loadConfig("../../broker/testdata/kraft-server.properties",
		[]string{"log.dirs=/srv/sluice", "num.partitions=3"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/srv/sluice" || cfg.NumPartitions != 3 || cfg.NodeID != 1 || !cfg.NodeIDSet || cfg.ControllerListen != ":9093" {
		t.Errorf("parsed %+v", cfg)
	}
	if !slices.Contains(ignored, "num.io.threads") {
		t.Errorf("ignored %q: num.io.threads missing", ignored)
	}
	// Overrides alone, without a file; and the file named in an error.
	if cfg, _, err := loadConfig("", []string{"node.id=0"}); err != nil || !cfg.NodeIDSet || cfg.NodeID != 0 {
		t.Errorf("--override node.id=0: %+v, %v", cfg, err)
	}
	if _, _, err := loadConfig("../../broker/testdata/kraft-server.properties", []string{"log.retention.hour=1"}); err == nil ||
		!strings.Contains(err.Error(), "kraft-server.properties: --override: unknown property \"log.retention.hour\": did you mean log.retention.hours?") {
		t.Errorf("misspelt override: %v", err)
	}
}
