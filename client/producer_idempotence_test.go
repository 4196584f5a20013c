package client

// Tests of the idempotent producer (idempotence.go) against idemBroker, a fake broker that
// keeps Sluice's producer-state rules (docs/protocol.md, Produce: each producer's epoch and last
// its window of batches per partition; a retry in the window sent alone is answered with its first offset,
// DUPLICATE_SEQUENCE_NUMBER with other batches; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, an older
// epoch INVALID_PRODUCER_EPOCH, an unknown producer with a sequence other than 0
// UNKNOWN_PRODUCER_ID; a partition's batches are appended all or none) and lets a test drop
// answers (the batches appended, the connection closed), refuse requests, or forget producers.
// What they prove: each record is in the log once, in the order sent, whatever was lost or
// refused; the producer's sequences and epochs are the ones Kafka's client would send.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/producerstate"
)

const idemTopic = "idem"

type idemPartition struct {
	log   []batch.Batch // base offsets stamped
	next  int64
	state *producerstate.State // the broker's own rules (producerstate)
}

// idemAction is what the broker does with the n-th Produce request (from 0).
type idemAction struct {
	refuse wire.ErrorCode // answer every partition with this, appending nothing
	drop   bool           // append, then close the connection without answering
	park   bool           // append, and answer only at release
}

type idemBroker struct {
	*fakeBroker
	t *testing.T

	// Guarded by the fake broker's handler lock (locked).
	parts    []*idemPartition
	produces int
	action   func(n int, req *wire.ProduceRequest) idemAction
	// initEpoch is the epoch InitProducerId gives; initRefusals, how many InitProducerId
	// requests are refused first (COORDINATOR_NOT_AVAILABLE).
	initEpoch    int16
	initRefusals int
	inits        int
	nextPID      int64
	// answered records, per Produce request, each partition's error code in the answer.
	answered [][]wire.ErrorCode
	// parked are the answers release sends.
	parked []func()
}

// release sends the parked answers.
func (ib *idemBroker) release() {
	var ps []func()
	ib.locked(func() { ps, ib.parked = ib.parked, nil })
	for _, f := range ps {
		f()
	}
}

func startIdemBroker(t *testing.T, partitions int) *idemBroker {
	ib := &idemBroker{t: t, nextPID: 1000}
	for range partitions {
		ib.parts = append(ib.parts, &idemPartition{state: producerstate.New()})
	}
	ib.fakeBroker = startFakeBrokerConn(t, t.TempDir(), ib.handle)
	ib.fakeBroker.ownsInitProducerID = true
	t.Cleanup(ib.close)
	return ib
}

func (ib *idemBroker) handle(c *fakeConn, h wire.RequestHeader, req wire.Request) []byte {
	switch req := req.(type) {
	case *wire.MetadataRequest:
		resp := &wire.MetadataResponse{ControllerID: 1,
			Brokers: []wire.MetadataBroker{{NodeID: 1, Host: "127.0.0.1", Port: 9, UnixPath: ib.path}}}
		mt := wire.MetadataTopic{Topic: idemTopic}
		for i := range ib.parts {
			mt.Partitions = append(mt.Partitions, wire.MetadataPartition{Partition: int32(i), Leader: 1, Replicas: []int32{1}, ISR: []int32{1}})
		}
		resp.Topics = append(resp.Topics, mt)
		return resp.AppendTo(nil)
	case *wire.InitProducerIDRequest:
		ib.inits++
		if req.TransactionalID != nil || req.ProducerID != -1 || req.ProducerEpoch != -1 {
			ib.t.Errorf("InitProducerId %+v, want an idempotent producer's (no transactional id, -1, -1)", req)
		}
		if ib.inits <= ib.initRefusals {
			return (&wire.InitProducerIDResponse{ErrorCode: wire.ErrCoordinatorNotAvailable, ProducerID: -1, ProducerEpoch: -1}).AppendTo(nil)
		}
		ib.nextPID++
		return (&wire.InitProducerIDResponse{ProducerID: ib.nextPID, ProducerEpoch: ib.initEpoch}).AppendTo(nil)
	case *wire.ProduceRequest:
		n := ib.produces
		ib.produces++
		var act idemAction
		if ib.action != nil {
			act = ib.action(n, req)
		}
		resp := &wire.ProduceResponse{}
		var codes []wire.ErrorCode
		for _, rt := range req.Topics {
			t := wire.ProduceResponseTopic{Topic: rt.Topic}
			for _, rp := range rt.Partitions {
				res := wire.ProduceResponsePartition{Partition: rp.Partition, BaseOffset: -1, LogAppendTimeMs: -1}
				if act.refuse != wire.NoError {
					res.ErrorCode = act.refuse
				} else {
					res.ErrorCode, res.BaseOffset = ib.appendLocked(ib.parts[rp.Partition], rp.Records)
				}
				codes = append(codes, res.ErrorCode)
				t.Partitions = append(t.Partitions, res)
			}
			resp.Topics = append(resp.Topics, t)
		}
		if act.drop {
			_ = c.nc.Close()
			return nil
		}
		if act.park {
			body, id := resp.AppendTo(nil), h.CorrelationID
			ib.parked = append(ib.parked, func() { _ = c.reply(id, body) })
			return nil
		}
		ib.answered = append(ib.answered, codes)
		return resp.AppendTo(nil)
	default:
		ib.t.Errorf("idem broker: unexpected %v request", h.APIKey)
		return nil
	}
}

// appendLocked checks a partition's batches against the producer state and appends them all,
// or none, returning the error code and the first one's offset.
func (ib *idemBroker) appendLocked(p *idemPartition, records []byte) (wire.ErrorCode, int64) {
	var bs []batch.Batch
	for rest := records; len(rest) > 0; {
		b, r, err := batch.Next(rest)
		if err != nil || b.Validate() != nil {
			return wire.ErrCorruptMessage, -1
		}
		bs = append(bs, b)
		rest = r
	}
	infos := make([]producerstate.BatchInfo, len(bs))
	next := batch.Offset(p.next)
	for i, b := range bs {
		infos[i] = producerstate.InfoOf(b)
		infos[i].FirstOffset, infos[i].LastOffset = next, next+batch.Offset(b.LastOffsetDelta())
		next = infos[i].LastOffset + 1
	}
	v, err := p.state.Check(infos)
	switch {
	case errors.Is(err, producerstate.ErrDuplicateSequence):
		return wire.ErrDuplicateSequenceNumber, -1
	case errors.Is(err, producerstate.ErrOutOfOrderSequence):
		return wire.ErrOutOfOrderSequenceNumber, -1
	case errors.Is(err, producerstate.ErrInvalidProducerEpoch):
		return wire.ErrInvalidProducerEpoch, -1
	case errors.Is(err, producerstate.ErrUnknownProducerID):
		return wire.ErrUnknownProducerID, -1
	case err != nil:
		return wire.ErrInvalidRecord, -1
	case v.Duplicate:
		return wire.NoError, int64(v.FirstOffset)
	}
	base := p.next
	for _, b := range bs {
		cp := batch.Batch(slices.Clone(b))
		cp.SetBaseOffset(batch.Offset(p.next))
		p.log = append(p.log, cp)
		p.next = int64(cp.NextOffset())
	}
	for i := range infos {
		p.state.Update(infos[i])
	}
	return wire.NoError, base
}

// values returns a partition's record values in log order.
func (ib *idemBroker) values(partition int) (out []string) {
	ib.locked(func() {
		for _, b := range ib.parts[partition].log {
			it := b.Iter(batch.IterOptions{})
			var r batch.Record
			for it.Next(&r) {
				out = append(out, string(r.Value))
			}
		}
	})
	return out
}

// stamps returns the producer fields of a partition's batches in log order.
func (ib *idemBroker) stamps(partition int) (out [][3]int64) {
	ib.locked(func() {
		for _, b := range ib.parts[partition].log {
			out = append(out, [3]int64{b.ProducerID(), int64(b.ProducerEpoch()), int64(b.BaseSequence())})
		}
	})
	return out
}

func newIdemProducer(t *testing.T, ib *idemBroker, cfg ProducerConfig) *Producer {
	t.Helper()
	rt := cfg.RequestTimeout
	if rt == 0 {
		rt = 5 * time.Second
	}
	cfg.Config = Config{Brokers: []string{ib.addr()}, SharedMemoryBytes: -1, Logger: fzDiscardLogger(), RequestTimeout: rt}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = time.Millisecond
	}
	if cfg.RetryBackoffMax == 0 {
		cfg.RetryBackoffMax = 5 * time.Millisecond
	}
	return newClosedAtEndProducer(t, cfg)
}

// idemOutcomes collects the callbacks of sent records by value.
type idemOutcomes struct {
	mu      sync.Mutex
	offsets map[string][]int64
	errs    map[string]error
}

func newIdemOutcomes() *idemOutcomes {
	return &idemOutcomes{offsets: map[string][]int64{}, errs: map[string]error{}}
}

func (o *idemOutcomes) cb(v string) func(RecordMetadata, error) {
	return func(md RecordMetadata, err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.offsets[v] = append(o.offsets[v], md.Offset)
		if err != nil {
			o.errs[v] = err
		}
	}
}

// sendAll sends n records (values prefix-0...) to partition part, then flushes.
func sendAll(t *testing.T, p *Producer, part int32, prefix string, n int, o *idemOutcomes) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var vals []string
	for i := range n {
		v := fmt.Sprintf("%s-%04d", prefix, i)
		vals = append(vals, v)
		p.Send(ctx, &Record{Topic: idemTopic, Partition: part, PartitionSet: true, Value: []byte(v)}, o.cb(v))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return vals
}

// checkOnceInOrder fails unless the partition's log is exactly want, and every record's
// callback ran once, without error.
func checkOnceInOrder(t *testing.T, ib *idemBroker, part int, want []string, o *idemOutcomes) {
	t.Helper()
	got := ib.values(part)
	if !slices.Equal(got, want) {
		t.Fatalf("partition %d holds %d records, want the %d sent once each, in order:\n got %v\nwant %v", part, len(got), len(want), got, want)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, v := range want {
		if len(o.offsets[v]) != 1 || o.errs[v] != nil {
			t.Fatalf("record %s: %d callbacks, err %v", v, len(o.offsets[v]), o.errs[v])
		}
	}
}

func TestProducerIdempotenceConfig(t *testing.T) {
	on, off := true, false
	tests := []struct {
		name    string
		cfg     ProducerConfig
		want    bool
		wantErr bool
	}{
		{name: "default", want: true},
		{name: "explicit on", cfg: ProducerConfig{EnableIdempotence: &on}, want: true},
		{name: "explicit off", cfg: ProducerConfig{EnableIdempotence: &off}, want: false},
		{name: "default, acks 1: off", cfg: ProducerConfig{Acks: AcksLeader}, want: false},
		{name: "default, acks 0: off", cfg: ProducerConfig{Acks: AcksNone}, want: false},
		{name: "default, max in flight 6: off", cfg: ProducerConfig{MaxInFlight: 6}, want: false},
		{name: "default, max in flight 5", cfg: ProducerConfig{MaxInFlight: 5}, want: true},
		{name: "default, max in flight 1", cfg: ProducerConfig{MaxInFlight: 1}, want: true},
		{name: "default, no retries: off", cfg: ProducerConfig{Retries: -1}, want: false},
		{name: "default, acks all explicit", cfg: ProducerConfig{Acks: AcksAll}, want: true},
		{name: "on, acks 1", cfg: ProducerConfig{EnableIdempotence: &on, Acks: AcksLeader}, wantErr: true},
		{name: "on, acks 0", cfg: ProducerConfig{EnableIdempotence: &on, Acks: AcksNone}, wantErr: true},
		{name: "on, max in flight 6", cfg: ProducerConfig{EnableIdempotence: &on, MaxInFlight: 6}, wantErr: true},
		{name: "on, no retries", cfg: ProducerConfig{EnableIdempotence: &on, Retries: -1}, wantErr: true},
		{name: "off, acks 1", cfg: ProducerConfig{EnableIdempotence: &off, Acks: AcksLeader}, want: false},
		{name: "off, max in flight 6", cfg: ProducerConfig{EnableIdempotence: &off, MaxInFlight: 6}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.withDefaults()
			if tc.wantErr {
				if !errors.Is(err, ErrProducerConfig) {
					t.Fatalf("err = %v, want ErrProducerConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.idempotent() != tc.want || got.EnableIdempotence == nil || *got.EnableIdempotence != tc.want {
				t.Fatalf("idempotent = %v, want %v", got.idempotent(), tc.want)
			}
			if got.MaxInFlight <= 0 || tc.cfg.MaxInFlight == 0 && got.MaxInFlight != 5 {
				t.Fatalf("max in flight %d, want 5 by default", got.MaxInFlight)
			}
		})
	}
	if _, err := NewProducer(context.Background(), ProducerConfig{Config: Config{Brokers: []string{"127.0.0.1:1"}},
		EnableIdempotence: &on, Acks: AcksLeader}); !errors.Is(err, ErrProducerConfig) {
		t.Fatalf("NewProducer with enable.idempotence and acks 1: %v, want ErrProducerConfig", err)
	}
}

// The producer's batches carry its id, epoch 0 and, per partition, sequences from 0 that
// follow on from batch to batch; without idempotence, no producer id.
func TestProducerIdempotentSequencesPerPartition(t *testing.T) {
	ib := startIdemBroker(t, 3)
	ib.locked(func() { ib.initRefusals = 2 }) // COORDINATOR_NOT_AVAILABLE is retried
	p := newIdemProducer(t, ib, ProducerConfig{BatchSize: 200, Linger: time.Millisecond})
	o := newIdemOutcomes()
	var want [3][]string
	for part := range int32(3) {
		want[part] = sendAll(t, p, part, fmt.Sprintf("p%d", part), 60, o)
	}
	var pid int64 = -1
	for part := range 3 {
		checkOnceInOrder(t, ib, part, want[part], o)
		var seq int64
		for i, s := range ib.stamps(part) {
			if pid < 0 {
				pid = s[0]
			}
			if s[0] != pid || s[1] != 0 || s[2] != seq {
				t.Fatalf("partition %d batch %d: producer %d epoch %d sequence %d, want %d, 0, %d", part, i, s[0], s[1], s[2], pid, seq)
			}
			ib.locked(func() { seq += int64(ib.parts[part].log[i].LastOffsetDelta()) + 1 })
		}
		if len(ib.stamps(part)) < 2 {
			t.Fatalf("partition %d: %d batches, want several", part, len(ib.stamps(part)))
		}
	}
	if pid <= 1000 {
		t.Fatalf("producer id %d is not the broker's", pid)
	}

	off := false
	q := newIdemProducer(t, ib, ProducerConfig{EnableIdempotence: &off})
	sendAll(t, q, 0, "plain", 3, o)
	st := ib.stamps(0)
	if last := st[len(st)-1]; last != [3]int64{-1, -1, -1} {
		t.Fatalf("without idempotence the batch carries %v, want -1, -1, -1", last)
	}
}

// A Produce whose answer is lost after the broker appended its batches (the connection closes)
// is retried; the broker recognizes the batches, so each record is in the log once, in order,
// and each callback has the record's offset.
func TestProducerIdempotentLostAnswersDeduplicated(t *testing.T) {
	ib := startIdemBroker(t, 1)
	ib.locked(func() {
		ib.action = func(n int, _ *wire.ProduceRequest) idemAction { return idemAction{drop: n%3 == 1} }
	})
	p := newIdemProducer(t, ib, ProducerConfig{BatchSize: 150, Linger: time.Millisecond})
	o := newIdemOutcomes()
	want := sendAll(t, p, 0, "r", 200, o)
	checkOnceInOrder(t, ib, 0, want, o)
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, v := range want {
		if got := o.offsets[v][0]; got != int64(i) && got != -1 {
			t.Fatalf("record %s: offset %d, want %d", v, got, i)
		}
	}
	if p.Stats().EpochBumps != 0 {
		t.Fatalf("%d epoch bumps, want none", p.Stats().EpochBumps)
	}
}

// With 5 requests in flight and requests refused at random with retriable errors (so that
// batches behind a refused one get OUT_OF_ORDER_SEQUENCE_NUMBER), or lost after the append,
// the log holds each record once, in the order sent.
func TestProducerIdempotentOrderWithFiveInFlight(t *testing.T) {
	ib := startIdemBroker(t, 2)
	ib.locked(func() {
		ib.action = func(n int, _ *wire.ProduceRequest) idemAction {
			switch n % 7 {
			case 2:
				return idemAction{refuse: wire.ErrNotLeaderOrFollower}
			case 4:
				return idemAction{refuse: wire.ErrRequestTimedOut}
			case 5:
				return idemAction{drop: true}
			}
			return idemAction{}
		}
	})
	p := newIdemProducer(t, ib, ProducerConfig{BatchSize: 120, Linger: -1, MaxInFlight: 5})
	o := newIdemOutcomes()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var want [2][]string
	for i := range 300 {
		part := int32(i % 2)
		v := fmt.Sprintf("p%d-%04d", part, i)
		want[part] = append(want[part], v)
		p.Send(ctx, &Record{Topic: idemTopic, Partition: part, PartitionSet: true, Value: []byte(v)}, o.cb(v))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for part := range 2 {
		checkOnceInOrder(t, ib, part, want[part], o)
	}
	sawOutOfOrder := false
	ib.locked(func() {
		for _, codes := range ib.answered {
			sawOutOfOrder = sawOutOfOrder || slices.Contains(codes, wire.ErrOutOfOrderSequenceNumber)
		}
	})
	t.Logf("out-of-order answers seen: %v; epoch bumps %d", sawOutOfOrder, p.Stats().EpochBumps)
}

// DUPLICATE_SEQUENCE_NUMBER for a batch sent alone is success, with the offset unknown.
func TestProducerIdempotentDuplicateIsSuccess(t *testing.T) {
	ib := startIdemBroker(t, 1)
	ib.locked(func() {
		ib.action = func(n int, _ *wire.ProduceRequest) idemAction {
			if n == 0 {
				return idemAction{refuse: wire.ErrDuplicateSequenceNumber}
			}
			return idemAction{}
		}
	})
	p := newIdemProducer(t, ib, ProducerConfig{})
	o := newIdemOutcomes()
	sendAll(t, p, 0, "d", 1, o)
	o.mu.Lock()
	defer o.mu.Unlock()
	if offs := o.offsets["d-0000"]; len(offs) != 1 || offs[0] != -1 || o.errs["d-0000"] != nil {
		t.Fatalf("callbacks %v, err %v: want one success with offset -1", offs, o.errs["d-0000"])
	}
}

// A broker that forgets the producer (UNKNOWN_PRODUCER_ID for the next batch) makes the
// producer bump its epoch and start the partition's sequences over from 0; nothing is lost or
// duplicated. At the last epoch, the bump takes a new producer id instead.
func TestProducerIdempotentUnknownProducerIDBumpsEpoch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		initEpoch int16
	}{{"epoch bump", 0}, {"new id at the last epoch", math.MaxInt16}} {
		t.Run(tc.name, func(t *testing.T) {
			ib := startIdemBroker(t, 2)
			ib.locked(func() { ib.initEpoch = tc.initEpoch })
			p := newIdemProducer(t, ib, ProducerConfig{BatchSize: 150, Linger: time.Millisecond})
			o := newIdemOutcomes()
			first := sendAll(t, p, 0, "a", 30, o)
			other := sendAll(t, p, 1, "o", 10, o)
			ib.locked(func() { ib.parts[0].state = producerstate.New() }) // the partition forgets the producer
			second := sendAll(t, p, 0, "b", 30, o)
			checkOnceInOrder(t, ib, 0, append(slices.Clone(first), second...), o)
			if got := p.Stats().EpochBumps; got != 1 {
				t.Fatalf("%d epoch bumps, want 1", got)
			}
			// After the bump the partition's batches have the new stamp from sequence 0.
			st := ib.stamps(0)
			old := st[0]
			var i int
			for i = range st {
				if st[i][0] != old[0] || st[i][1] != old[1] {
					break
				}
			}
			nw := st[i]
			switch tc.initEpoch {
			case math.MaxInt16:
				if nw[0] == old[0] || nw[1] != int64(tc.initEpoch) {
					t.Fatalf("after the bump at the last epoch: %v, want a new producer id (was %v)", nw, old)
				}
			default:
				if nw[0] != old[0] || nw[1] != old[1]+1 {
					t.Fatalf("after the bump: %v, want the same id at epoch %d", nw, old[1]+1)
				}
			}
			if nw[2] != 0 {
				t.Fatalf("the first batch of the new epoch has sequence %d, want 0", nw[2])
			}
			// Partition 1 moves to the new epoch too, from 0, for its next batch.
			more := sendAll(t, p, 1, "o2", 5, o)
			checkOnceInOrder(t, ib, 1, append(slices.Clone(other), more...), o)
			st1 := ib.stamps(1)
			j := slices.IndexFunc(st1, func(s [3]int64) bool { return s[0] == nw[0] && s[1] == nw[1] })
			if j < 0 || st1[j][2] != 0 || st1[len(st1)-1][0] != nw[0] || st1[len(st1)-1][1] != nw[1] {
				t.Fatalf("partition 1's batches %v: want the new id and epoch %v from sequence 0 for the later ones", st1, nw)
			}
		})
	}
}

// INVALID_PRODUCER_EPOCH fails the batch: the records' callbacks get the error.
func TestProducerIdempotentInvalidEpochFails(t *testing.T) {
	ib := startIdemBroker(t, 1)
	ib.locked(func() {
		ib.action = func(n int, _ *wire.ProduceRequest) idemAction {
			if n == 0 {
				return idemAction{refuse: wire.ErrInvalidProducerEpoch}
			}
			return idemAction{}
		}
	})
	p := newIdemProducer(t, ib, ProducerConfig{})
	o := newIdemOutcomes()
	sendAll(t, p, 0, "e", 1, o)
	o.mu.Lock()
	err := o.errs["e-0000"]
	o.mu.Unlock()
	if !errors.Is(err, wire.ErrInvalidProducerEpoch) {
		t.Fatalf("err = %v, want INVALID_PRODUCER_EPOCH", err)
	}
	// The producer goes on: the next records land (after a start over of the partition).
	o2 := newIdemOutcomes()
	want := sendAll(t, p, 0, "f", 3, o2)
	checkOnceInOrder(t, ib, 0, want, o2)
}

// Seeded random faults on every request (answers lost after the append, retriable refusals)
// across three partitions with 5 requests in flight: each record once, in order, every time.
func TestProducerIdempotentRandomFaults(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			ib := startIdemBroker(t, 3)
			rng := rand.New(rand.NewPCG(seed, 25)) // the broker's (under its lock)
			pick := rand.New(rand.NewPCG(seed, 26))
			ib.locked(func() {
				ib.action = func(int, *wire.ProduceRequest) idemAction {
					switch x := rng.IntN(100); {
					case x < 15:
						return idemAction{drop: true}
					case x < 25:
						return idemAction{refuse: wire.ErrNotLeaderOrFollower}
					case x < 30:
						return idemAction{refuse: wire.ErrRequestTimedOut}
					}
					return idemAction{}
				}
			})
			p := newIdemProducer(t, ib, ProducerConfig{BatchSize: 100 + int(seed)*20, Linger: -1})
			o := newIdemOutcomes()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var want [3][]string
			for i := range 240 {
				part := int32(pick.IntN(3))
				v := fmt.Sprintf("p%d-%04d", part, i)
				want[part] = append(want[part], v)
				p.Send(ctx, &Record{Topic: idemTopic, Partition: part, PartitionSet: true, Value: []byte(v)}, o.cb(v))
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for part := range 3 {
				checkOnceInOrder(t, ib, part, want[part], o)
			}
		})
	}
}

// A batch that expires in flight (delivery.timeout.ms; the broker appended it and answers
// late) leaves its outcome unknown: the partition's next batch waits for that request to end,
// then goes with a bumped epoch from sequence 0, and nothing is appended twice.
func TestProducerIdempotentExpiryInFlightBumpsEpoch(t *testing.T) {
	ib := startIdemBroker(t, 1)
	ib.locked(func() {
		ib.action = func(n int, _ *wire.ProduceRequest) idemAction { return idemAction{park: n == 0} }
	})
	cfg := ProducerConfig{Linger: -1, DeliveryTimeout: 300 * time.Millisecond}
	cfg.RequestTimeout = time.Hour
	p := newIdemProducer(t, ib, cfg)
	o := newIdemOutcomes()
	sendAll(t, p, 0, "x", 1, o) // Flush returns at the expiry
	o.mu.Lock()
	err := o.errs["x-0000"]
	o.mu.Unlock()
	if !errors.Is(err, ErrDeliveryTimeout) {
		t.Fatalf("the parked batch: %v, want a delivery timeout", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o2 := newIdemOutcomes()
	var cfgMore []string
	for i := range 3 {
		v := fmt.Sprintf("y-%04d", i)
		cfgMore = append(cfgMore, v)
		p.Send(ctx, &Record{Topic: idemTopic, Partition: 0, PartitionSet: true, Value: []byte(v)}, o2.cb(v))
	}
	ib.release() // the late answer: success, ignored for the expired batch
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := ib.values(0), append([]string{"x-0000"}, cfgMore...); !slices.Equal(got, want) {
		t.Fatalf("log %v, want %v", got, want)
	}
	for _, v := range cfgMore {
		if e := o2.errs[v]; e != nil || len(o2.offsets[v]) != 1 {
			t.Fatalf("%s: %v", v, e)
		}
	}
	st := ib.stamps(0)
	if st[0][1] != 0 || st[1][1] != 1 || st[1][2] != 0 || p.Stats().EpochBumps != 1 {
		t.Fatalf("stamps %v, %d bumps: want the batch after the expiry at epoch 1, sequence 0, one bump", st, p.Stats().EpochBumps)
	}
}

// Batches that pile up behind a slow request go out together, several of the partition in one
// request, as without idempotence (the broker remembers a request's batches as one run): each
// record once, in order, with its offset, in fewer requests than batches, at most 5 of them
// out at a time.
func TestProducerIdempotentBacklogPacked(t *testing.T) {
	ib := startIdemBroker(t, 1)
	ib.locked(func() {
		ib.action = func(n int, _ *wire.ProduceRequest) idemAction { return idemAction{park: n == 0} }
	})
	p := newIdemProducer(t, ib, ProducerConfig{BatchSize: 100, Linger: -1})
	o := newIdemOutcomes()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var want []string
	send := func(i int) {
		v := fmt.Sprintf("m-%04d-%s", i, "padding-to-fill-a-batch-of-one-hundred-bytes")
		want = append(want, v)
		p.Send(ctx, &Record{Topic: idemTopic, Partition: 0, PartitionSet: true, Value: []byte(v)}, o.cb(v))
	}
	send(0)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		var parked int
		ib.locked(func() { parked = len(ib.parked) })
		if parked == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first request never came")
		}
	}
	const records = 200 // well past the window, which the first (parked) batch holds open
	for i := 1; i < records; i++ {
		send(i)
	}
	ib.release()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkOnceInOrder(t, ib, 0, want, o)
	o.mu.Lock()
	for i, v := range want {
		if got := o.offsets[v][0]; got != int64(i) {
			o.mu.Unlock()
			t.Fatalf("record %d: offset %d", i, got)
		}
	}
	o.mu.Unlock()
	var seq int64
	st := ib.stamps(0)
	for i, s := range st {
		if s[2] != seq {
			t.Fatalf("batch %d: sequence %d, want %d", i, s[2], seq)
		}
		ib.locked(func() { seq += int64(ib.parts[0].log[i].LastOffsetDelta()) + 1 })
	}
	// One batch a record; while the first request is parked, at most 5 requests are out, so
	// the backlog behind them goes several batches a request.
	stats := p.Stats()
	if len(st) != records || stats.Requests*4 > int64(len(st)) {
		t.Fatalf("%d batches in %d requests for %d records of a batch each: want every batch, in requests of several", len(st), stats.Requests, records)
	}
	t.Logf("%d batches in %d requests", len(st), stats.Requests)
}
