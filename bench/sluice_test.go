package bench

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
)

// TestSluiceDriverDeletesTopics: the Sluice driver deletes a topic (as the harness deletes its
// probes' topics) on the broker: a second delete finds nothing, and the name can be created
// afresh.
func TestSluiceDriverDeletesTopics(t *testing.T) {
	br := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := NewSluiceDriver(ctx, "sluice-tcp", br.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.CreateTopic(ctx, "probe", 2); err != nil {
		t.Fatal(err)
	}
	var td TopicDeleter = d
	if err := td.DeleteTopic(ctx, "probe"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if err := td.DeleteTopic(ctx, "probe"); err == nil {
		t.Error("DeleteTopic a second time: no error, so the first did not delete the topic")
	}
	if err := d.CreateTopic(ctx, "probe", 1); err != nil {
		t.Errorf("CreateTopic after the delete: %v", err)
	}
}
