package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
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
		// Each thing said once: no package prefix, the code's name once, in parentheses.
		if msg := tc.err.Error(); strings.Contains(msg, "client:") || strings.Count(msg, "(") < 1 {
			t.Errorf("%s: %q repeats the package or lacks the code", tc.name, msg)
		}
	}
	if msg := describeErr.Error(); !strings.HasPrefix(msg, `describe topic "absent": unknown topic or partition (UNKNOWN_TOPIC_OR_PARTITION)`) ||
		strings.Count(msg, "UNKNOWN_TOPIC_OR_PARTITION") != 1 {
		t.Errorf("describe missing: %q, want `describe topic \"absent\": unknown topic or partition (UNKNOWN_TOPIC_OR_PARTITION)[: broker's message]`", msg)
	}
}

// ListOffsets answers each partition's start, end, the offset at a time and the record with
// the largest timestamp, and reports the partitions it could not look up by name, leaving the
// others' answers in place.
func TestAdminListOffsets(t *testing.T) {
	_, ctx, a, p := adminWithTopic(t, "lo", 2)
	// Partition 0: offsets 0..3 at times 1000, 3000 (the largest), 2000, 2000 s after 1970;
	// partition 1 stays empty.
	for _, sec := range []int64{1000, 3000, 2000, 2000} {
		if _, err := p.SendSync(ctx, &client.Record{Topic: "lo", Partition: 0, PartitionSet: true, Value: []byte("v"), Timestamp: time.Unix(sec, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	p0, p1, missing := client.TopicPartition{Topic: "lo"}, client.TopicPartition{Topic: "lo", Partition: 1}, client.TopicPartition{Topic: "lo", Partition: 7}
	ms := func(sec int64) int64 { return sec * 1000 }
	for _, tc := range []struct {
		name string
		tp   client.TopicPartition
		spec client.OffsetSpec
		want client.ListedOffset
	}{
		{"earliest", p0, client.OffsetEarliest, client.ListedOffset{Offset: 0, Timestamp: -1}},
		{"latest", p0, client.OffsetLatest, client.ListedOffset{Offset: 4, Timestamp: -1}},
		// The first offset whose record is at or after the time, as in Kafka: offset 1 (3000),
		// not offset 2, the first record of exactly that time.
		{"at a record's time", p0, client.OffsetAt(time.Unix(2000, 0)), client.ListedOffset{Offset: 1, Timestamp: ms(3000)}},
		{"at the first record's time", p0, client.OffsetAt(time.Unix(1000, 0)), client.ListedOffset{Offset: 0, Timestamp: ms(1000)}},
		{"between records' times", p0, client.OffsetAt(time.Unix(1500, 0)), client.ListedOffset{Offset: 1, Timestamp: ms(3000)}},
		{"before 1970", p0, client.OffsetAt(time.Unix(-5, 0)), client.ListedOffset{Offset: 0, Timestamp: ms(1000)}},
		{"after every record", p0, client.OffsetAt(time.Unix(4000, 0)), client.ListedOffset{Offset: -1, Timestamp: -1}},
		{"max timestamp", p0, client.OffsetMaxTimestamp, client.ListedOffset{Offset: 1, Timestamp: ms(3000)}},
		{"empty partition's end", p1, client.OffsetLatest, client.ListedOffset{Offset: 0, Timestamp: -1}},
		{"empty partition at a time", p1, client.OffsetAt(time.Unix(0, 0)), client.ListedOffset{Offset: -1, Timestamp: -1}},
	} {
		got, err := a.ListOffsets(ctx, map[client.TopicPartition]client.OffsetSpec{tc.tp: tc.spec})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		g := got[tc.tp]
		g.LeaderEpoch = 0 // the broker's answer: not what is tested here
		if len(got) != 1 || g != tc.want {
			t.Errorf("%s (%s): %+v, want %+v", tc.name, tc.spec, got, tc.want)
		}
	}

	// Several at once, one of them a partition the topic does not have and one a topic that
	// does not exist: the others are answered.
	absent := client.TopicPartition{Topic: "absent"}
	got, err := a.ListOffsets(ctx, map[client.TopicPartition]client.OffsetSpec{
		p0: client.OffsetLatest, p1: client.OffsetEarliest, missing: client.OffsetLatest, absent: client.OffsetEarliest,
	})
	if len(got) != 2 || got[p0].Offset != 4 || got[p1].Offset != 0 {
		t.Errorf("the partitions that exist: %+v, want lo-0 at 4 and lo-1 at 0", got)
	}
	if !errors.Is(err, client.ErrUnknownTopic) || !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
		t.Errorf("missing partitions: %v, want ErrUnknownTopic", err)
	}
	for _, name := range []string{"lo-7", "absent-0"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("the error %q does not name %s", err, name)
		}
	}
	if got, err := a.ListOffsets(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("nothing asked: %v, %v", got, err)
	}
}

// ListGroupOffsets shows what a group committed; CommitGroupOffsets moves it, and the group's
// next consumer starts there; a partition that does not exist is refused by name.
func TestAdminGroupOffsets(t *testing.T) {
	b, ctx, a, p := adminWithTopic(t, "go", 2)
	for i := range 5 {
		if _, err := p.SendSync(ctx, &client.Record{Topic: "go", Partition: 0, PartitionSet: true, Value: []byte{byte('a' + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	p0, p1 := client.TopicPartition{Topic: "go"}, client.TopicPartition{Topic: "go", Partition: 1}

	if got, err := a.ListGroupOffsets(ctx, "g"); err != nil || len(got) != 0 {
		t.Fatalf("a group that committed nothing: %v, %v", got, err)
	}
	if ids, err := a.ListGroups(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("groups before any commit: %v, %v; want none", ids, err)
	}
	newConsumer := func() *client.Consumer {
		c, err := client.NewConsumer(ctx, client.ConsumerConfig{Config: client.Config{Brokers: []string{b.Addr().String()}},
			GroupID: "g", AutoOffsetReset: client.OffsetResetEarliest, MaxPollRecords: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Assign([]client.TopicPartition{p0}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newConsumer()
	recs, err := c.Poll(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("poll: %d records, %v", len(recs), err)
	}
	if err := c.CommitSync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ListGroupOffsets(ctx, "g"); err != nil || len(got) != 1 || got[p0] != 2 {
		t.Fatalf("after the consumer committed 2 records: %v, %v; want go-0 at 2", got, err)
	}
	if err := a.CommitGroupOffsets(ctx, "another", map[client.TopicPartition]int64{p1: 0}); err != nil {
		t.Fatal(err)
	}
	if gs, err := a.ListGroups(ctx); err != nil || len(gs) != 2 || gs[0].ID != "another" || gs[1].ID != "g" {
		t.Fatalf("groups after two committed: %v, %v; want another and g", gs, err)
	}

	// Back to offset 1 on partition 0, and a first commit on partition 1.
	if err := a.CommitGroupOffsets(ctx, "g", map[client.TopicPartition]int64{p0: 1, p1: 0}); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ListGroupOffsets(ctx, "g"); err != nil || len(got) != 2 || got[p0] != 1 || got[p1] != 0 {
		t.Fatalf("after CommitGroupOffsets: %v, %v; want go-0 at 1, go-1 at 0", got, err)
	}
	c = newConsumer()
	defer c.Close(ctx)
	if recs, err := c.Poll(ctx); err != nil || len(recs) == 0 || recs[0].Offset != 1 || string(recs[0].Value) != "b" {
		t.Fatalf("the group's next consumer: %v, %v; want it to start at offset 1", recs, err)
	}

	missing := client.TopicPartition{Topic: "absent", Partition: 0}
	err = a.CommitGroupOffsets(ctx, "g", map[client.TopicPartition]int64{missing: 3, p1: 0})
	if !errors.Is(err, client.ErrUnknownTopic) || !strings.Contains(err.Error(), "absent-0") || strings.Contains(err.Error(), "go-1") {
		t.Errorf("a commit to a missing topic: %v; want ErrUnknownTopic naming absent-0 (and not go-1)", err)
	}
	if err := a.CommitGroupOffsets(ctx, "g", map[client.TopicPartition]int64{p0: -1}); err == nil {
		t.Error("a negative offset was committed")
	}
	if _, err := a.ListGroupOffsets(ctx, ""); !errors.Is(err, client.ErrNoGroup) {
		t.Errorf("no group: %v, want ErrNoGroup", err)
	}
	// A group is known while it has a committed offset: its topic's deletion takes them all.
	// (The consumer goes first: its closing commit would be retried against the deleted topic.)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteTopic(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	if ids, err := a.ListGroups(ctx); err != nil || len(ids) != 0 {
		t.Errorf("groups after their topic's deletion: %v, %v; want none", ids, err)
	}
}

// NewAdminWithConfig takes the first bootstrap broker that answers, refuses negative timeouts,
// and bounds a call made without a deadline by DefaultAPITimeout: a broker that accepts the
// connection and never answers does not hold the call for ever.
func TestAdminWithConfig(t *testing.T) {
	b := startBroker(t)
	ctx := prodCtx(t, 30*time.Second)
	dead := "unix://" + t.TempDir() + "/none.sock"
	a, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: []string{dead, b.Addr().String()}, ClientID: "ops"}})
	if err != nil {
		t.Fatalf("the second bootstrap broker answers: %v", err)
	}
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: "cfg"}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if _, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: []string{dead}}}); !errors.Is(err, client.ErrNoBrokers) {
		t.Errorf("no broker answers: %v, want ErrNoBrokers", err)
	}
	if _, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: []string{b.Addr().String()}}, DefaultAPITimeout: -1}); !errors.Is(err, client.ErrAdminConfig) {
		t.Errorf("a negative default.api.timeout.ms: %v, want ErrAdminConfig", err)
	}

	// A listener that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	// NewAdmin waits for an answer (ApiVersions) from each bootstrap broker in turn: a broker
	// that never answers fails within default.api.timeout.ms when the caller's context has no
	// deadline, naming the address.
	done := make(chan error, 1)
	go func() {
		_, err := client.NewAdminWithConfig(context.Background(), client.AdminConfig{Config: client.Config{Brokers: []string{ln.Addr().String()}}, DefaultAPITimeout: 200 * time.Millisecond})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.ErrNoBrokers) || !strings.Contains(err.Error(), ln.Addr().String()) {
			t.Errorf("a broker that never answers: %v, want ErrNoBrokers and context.DeadlineExceeded, naming it", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("NewAdmin with context.Background() to a broker that never answers has not returned after 30 s (DefaultAPITimeout 200 ms)")
	}
}

// adminWithTopic starts a broker with topic made of partitions partitions, and returns it with
// a context bounded at 30 s, an Admin and a producer without linger on it (closed at the test's
// end).
func adminWithTopic(t *testing.T, topic string, partitions int32) (*broker.Broker, context.Context, *client.Admin, *client.Producer) {
	t.Helper()
	b := startBroker(t)
	ctx := prodCtx(t, 30*time.Second)
	a, err := client.NewAdmin(ctx, b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer(ctx, client.ProducerConfig{Config: client.Config{Brokers: []string{b.Addr().String()}}, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return b, ctx, a, p
}

// A consumer looks offsets up at each partition's leader (ListOffsets) and reads its group's
// committed offsets (Committed) without moving its positions: the lag of a partition is the
// difference.
func TestConsumerListOffsetsAndCommitted(t *testing.T) {
	b, ctx, _, p := adminWithTopic(t, "lag", 2)
	for _, sec := range []int64{1000, 2000, 3000} {
		if _, err := p.SendSync(ctx, &client.Record{Topic: "lag", Partition: 0, PartitionSet: true, Value: []byte("v"), Timestamp: time.Unix(sec, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	p0, p1 := client.TopicPartition{Topic: "lag"}, client.TopicPartition{Topic: "lag", Partition: 1}
	c, err := client.NewConsumer(ctx, client.ConsumerConfig{Config: client.Config{Brokers: []string{"unix://" + b.UnixAddr().String()}},
		GroupID: "lag", EnableAutoCommit: new(false), AutoOffsetReset: client.OffsetResetEarliest, MaxPollRecords: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Assign([]client.TopicPartition{p0}); err != nil {
		t.Fatal(err)
	}
	if recs, err := c.Poll(ctx); err != nil || len(recs) != 1 {
		t.Fatalf("poll: %v, %v", recs, err)
	}
	if err := c.CommitSync(ctx); err != nil {
		t.Fatal(err)
	}

	got, err := c.ListOffsets(ctx, map[client.TopicPartition]client.OffsetSpec{
		p0: client.OffsetLatest, p1: client.OffsetEarliest,
	})
	if err != nil || got[p0].Offset != 3 || got[p1].Offset != 0 || len(got) != 2 {
		t.Fatalf("ListOffsets: %v, %v; want lag-0 ending at 3 and lag-1 starting at 0", got, err)
	}
	if got, err := c.ListOffsets(ctx, map[client.TopicPartition]client.OffsetSpec{p0: client.OffsetAt(time.Unix(1500, 0))}); err != nil || got[p0].Offset != 1 || got[p0].Timestamp != 2_000_000 {
		t.Fatalf("ListOffsets at a time: %v, %v; want offset 1 (2,000 s)", got, err)
	}
	committed, err := c.Committed(ctx, []client.TopicPartition{p0, p1, p0})
	if err != nil || len(committed) != 1 || committed[p0] != 1 {
		t.Fatalf("Committed: %v, %v; want lag-0 at 1 and nothing for lag-1", committed, err)
	}
	// The lookups moved nothing: the next record is still offset 1.
	if pos, err := c.Position(ctx, p0); err != nil || pos != 1 {
		t.Fatalf("position after the lookups: %d, %v; want 1", pos, err)
	}

	missing, absent := client.TopicPartition{Topic: "lag", Partition: 5}, client.TopicPartition{Topic: "absent"}
	got, err = c.ListOffsets(ctx, map[client.TopicPartition]client.OffsetSpec{p0: client.OffsetEarliest, missing: client.OffsetLatest, absent: client.OffsetLatest})
	if len(got) != 1 || got[p0].Offset != 0 {
		t.Errorf("the partition that exists: %v, want lag-0 at 0", got)
	}
	if !errors.Is(err, client.ErrUnknownTopic) || !strings.Contains(err.Error(), "lag-5") || !strings.Contains(err.Error(), "absent-0") {
		t.Errorf("missing partitions: %v, want ErrUnknownTopic naming lag-5 and absent-0", err)
	}

	nogroup, err := client.NewConsumer(ctx, client.ConsumerConfig{Config: client.Config{Brokers: []string{b.Addr().String()}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nogroup.Committed(ctx, []client.TopicPartition{p0}); !errors.Is(err, client.ErrNoGroup) {
		t.Errorf("Committed without a group: %v, want ErrNoGroup", err)
	}
	nogroup.Close(ctx)
	if _, err := nogroup.ListOffsets(ctx, map[client.TopicPartition]client.OffsetSpec{p0: client.OffsetLatest}); !errors.Is(err, client.ErrConsumerClosed) {
		t.Errorf("ListOffsets after Close: %v, want ErrConsumerClosed", err)
	}
}
