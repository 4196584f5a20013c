package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
)

// Three `sluice serve` processes (through cluster local): kill -9 the broker leading a
// partition of RF 3 while a producer with retries (acks=1, delivery.timeout.ms 30 s) runs; the
// producer resumes through the new leader, and every record acknowledged after the kill is
// readable from it.
//
// It needs the cluster of issue #22 (node ids from 0, process.roles and the voters parsed, the
// quorum, fencing after broker.session.timeout.ms, clients that follow leaders): before that,
// cluster local's brokers refuse their properties and the test fails saying so.
func TestClusterProcessLeaderKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildSluice(t)
	lc, err := startClusterProc(bin, []string{"--brokers", "3", "--base-port", "0", "--data-dir", t.TempDir(),
		"--property", "broker.session.timeout.ms=2000", "--property", "broker.heartbeat.interval.ms=500",
		"--ready-timeout", "20s", "--stop-timeout", "10s"}, 25*time.Second)
	if err != nil {
		t.Fatalf("a cluster of three broker processes did not start (this test needs the cluster of issue #22: "+
			"node.id from 0, process.roles, controller.quorum.voters, the controller quorum): %v", err)
	}
	t.Cleanup(func() {
		if err := lc.Stop(20 * time.Second); err != nil {
			t.Error(err)
		}
	})
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\ncluster local's output:\n%s", append(args, lc.out.String())...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	a, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: lc.bootstrap}})
	if err != nil {
		fail("admin: %v", err)
	}
	defer a.Close()
	const topic = "failover"
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 3}); err != nil {
		fail("create a topic of RF 3: %v", err)
	}
	leader, epoch, err := waitLeader(ctx, lc.bootstrap, topic, -1)
	if err != nil {
		fail("the new topic's leader: %v", err)
	}

	p, err := client.NewProducer(ctx, client.ProducerConfig{
		Config: client.Config{Brokers: lc.bootstrap, RequestTimeout: 5 * time.Second},
		Acks:   client.AcksLeader, DeliveryTimeout: 30 * time.Second, Linger: -1, MaxInFlight: 1,
	})
	if err != nil {
		fail("producer: %v", err)
	}
	defer p.Close(context.Background())
	// send produces one record and waits for its outcome.
	send := func(v string) error {
		done := make(chan error, 1)
		p.Send(ctx, &client.Record{Topic: topic, Partition: 0, PartitionSet: true, Value: []byte(v)}, func(_ client.RecordMetadata, err error) { done <- err })
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range 20 {
		if err := send(fmt.Sprintf("before-%d", i)); err != nil {
			fail("produce before the kill: %v", err)
		}
	}
	if err := lc.Signal(leader, syscall.SIGKILL); err != nil {
		fail("kill -9 node %d: %v", leader, err)
	}
	killed := time.Now()
	// The producer keeps going: the first records wait for the new leader (retries within
	// delivery.timeout.ms), the later ones go to it.
	var acked []string
	for i := 0; len(acked) < 20 && i < 200; i++ {
		v := fmt.Sprintf("after-%d", i)
		err := send(v)
		if err != nil {
			if ctx.Err() != nil {
				fail("the producer did not resume %v after the kill of leader %d: %v", time.Since(killed), leader, err)
			}
			t.Logf("%s: %v", v, err) // a record may fail; those acknowledged must all be there
			continue
		}
		acked = append(acked, v)
	}
	if len(acked) < 20 {
		fail("only %d records acknowledged after the kill of leader %d", len(acked), leader)
	}
	t.Logf("first record acknowledged after the kill within %v", time.Since(killed).Round(time.Millisecond))
	newLeader, newEpoch, err := waitLeader(ctx, survivors(lc, leader), topic, leader)
	if err != nil || newLeader == leader || newEpoch <= epoch {
		fail("leader after the kill of %d: %d epoch %d (was epoch %d), %v; want another broker, a later epoch", leader, newLeader, newEpoch, epoch, err)
	}

	// Every record acknowledged after the kill is readable from the new leader.
	c, err := client.NewConsumer(ctx, client.ConsumerConfig{Config: client.Config{Brokers: survivors(lc, leader)}, AutoOffsetReset: client.OffsetResetEarliest})
	if err != nil {
		fail("consumer: %v", err)
	}
	defer c.Close(context.Background())
	if err := c.Assign([]client.TopicPartition{{Topic: topic, Partition: 0}}); err != nil {
		fail("assign: %v", err)
	}
	want := map[string]bool{}
	for _, v := range acked {
		want[v] = true
	}
	for len(want) > 0 {
		recs, err := c.Poll(ctx)
		if err != nil {
			fail("reading from the new leader %d, %d acknowledged records not found (%v): %v", newLeader, len(want), keys(want), err)
		}
		for _, r := range recs {
			delete(want, string(r.Value))
		}
	}
}

func keys(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	if len(ks) > 5 {
		ks = append(ks[:5], "...")
	}
	return strings.Join(ks, ",")
}
