package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// What an application sees from Admin for a missing topic, an invalid name and a bad config:
// errors that match the broker's code and, for a missing topic, the ErrUnknownTopic that the
// Producer and Consumer report, each naming the topic.
func TestAdminErrors(t *testing.T) {
	b := startBroker(t)
	ctx := prodCtx(t, 30*time.Second)
	a, err := client.NewAdmin(ctx, "unix://"+b.UnixAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: "present", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	_, _, describeErr := a.DescribeTopic(ctx, "absent")
	tests := []struct {
		name string
		err  error
		want []error
		text string // the error names what failed
	}{
		{"describe missing", describeErr, []error{client.ErrUnknownTopic, wire.ErrUnknownTopicOrPartition}, `"absent"`},
		{"alter missing", a.AlterTopicConfigs(ctx, "absent", map[string]string{"retention.ms": "1000"}, nil),
			[]error{client.ErrUnknownTopic, wire.ErrUnknownTopicOrPartition}, `"absent"`},
		{"delete missing", a.DeleteTopic(ctx, "absent"), []error{client.ErrUnknownTopic, wire.ErrUnknownTopicOrPartition}, `"absent"`},
		{"create existing", a.CreateTopic(ctx, client.TopicSpec{Name: "present"}), []error{wire.ErrTopicAlreadyExists}, `"present"`},
		{"create invalid name", a.CreateTopic(ctx, client.TopicSpec{Name: "no such"}), []error{wire.ErrInvalidTopicException}, `"no such"`},
		{"create unknown config", a.CreateTopic(ctx, client.TopicSpec{Name: "cfg", Configs: map[string]string{"retention.msx": "1"}}),
			[]error{wire.ErrInvalidConfig}, "retention.msx"},
		{"alter bad value", a.AlterTopicConfigs(ctx, "present", map[string]string{"retention.ms": "soon"}, nil),
			[]error{wire.ErrInvalidConfig}, "retention.ms"},
	}
	for _, tc := range tests {
		for _, want := range tc.want {
			if !errors.Is(tc.err, want) {
				t.Errorf("%s: %v, want it to match %v", tc.name, tc.err, want)
			}
		}
		if tc.err != nil && !strings.Contains(tc.err.Error(), tc.text) {
			t.Errorf("%s: %q does not say %s", tc.name, tc.err, tc.text)
		}
	}
}
