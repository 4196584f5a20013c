package chaos

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// checker is one Check's state. It decodes each event once and keeps no event: per value one
// valueInfo (ids from 1, in order of first sight), per partition one slot per offset, per
// reader pass its last offset, per group partition its commits, the faults and the
// acknowledgement times. Everything that needs the whole history (lost, duplicated,
// non-monotonic, unexpected, incomplete, the outages) is decided at the end from those.
type checker struct {
	opts  CheckOptions
	final FinalState
	res   *Result

	values    []valueInfo // values[0] unused: id 0 is "none"
	writers   denseMap[int32]
	seqs      []denseMap[int32] // per writer index: seq → value id
	writerIDs []int             // per writer index: the writer's id
	raw       map[string]int32  // values that do not parse → id
	rawText   map[int32]string  // and back

	parts    []*partState
	partIdx  map[TopicPartition]int32
	lastTP   TopicPartition // a one-entry cache of partIdx
	lastPart int32

	passes  map[passKey]*passState
	commits map[commitKey]*commitState

	groupParts     map[commitKey]*groupPart  // check_group.go
	openRuns       map[groupRunKey]*groupRun // each consumer's current run per partition
	deliveryGroups map[string]bool           // the groups with a delivery

	faults    []faultSpan
	openFault map[int]int // fault ID → index in faults of its unhealed injection
	acks      []int64     // completion times of the OK sends

	listed map[string]int // anomalies listed per kind (the cap)
}

// valueInfo is what the history says of one value (64 bytes: the int64s first).
type valueInfo struct {
	seq       int64
	ackOffset int64 // the first OK send's offset
	readOff   int64
	finalOff  int64
	widx      int32 // the writer's index in checker.writerIDs, -1 for a value that does not parse
	sendTP    int32 // the first send's partition index, -1 if never sent
	readTP    int32 // where it was first read (-1: never), for the unexpected listing
	finalTP   int32 // first copy in the final read (set at the end; -1: none)
	walkTP    int32 // the partition the end's walk last saw it in (index + 1)
	copies    int32 // copies in the final read (the end's walk)
	flags     uint8
}

const (
	vSentOK uint8 = 1 << iota
	vSentFailed
	vRaw   // did not parse: writer and seq are meaningless
	vFound // in its send partition's final read
)

// partState is one partition: per offset the first value any observation put there and the
// value of the final read there.
type partState struct {
	tp           TopicPartition
	slots        denseMap[slot]
	inconsistent map[int64]bool // offsets already counted inconsistent
	finalRecords int
	finalMin     int64
	finalMax     int64
	acks         []int64 // completion times of the OK sends to this partition
	pastHW       int     // final-read records at or past the final high watermark
	pastHWMin    int64   // the first of them
}

type slot struct {
	seen  int32 // first value seen at the offset (any read, or an acknowledgement)
	final int32 // the final read's value at the offset
}

type passKey struct {
	reader, pass int
	part         int32
}

type passState struct{ last int64 }

type commitKey struct {
	group string
	part  int32
}

type commitState struct {
	maxOK, lastCommitted int64
	hasOK, hasCommitted  bool
}

type faultSpan struct {
	id         int
	kind       string
	start, end int64 // end is math.MaxInt64 while not healed
}

// maxListed is how many anomalies of one kind Result.Anomalies lists.
const maxListed = 1000

func newChecker(final FinalState, opts CheckOptions) *checker {
	if opts.OutageThreshold <= 0 {
		opts.OutageThreshold = time.Second
	}
	if opts.RecoveryWindow <= 0 {
		opts.RecoveryWindow = 10 * time.Second
	}
	return &checker{
		opts:           opts,
		final:          final,
		res:            &Result{Options: opts, LongestByFault: map[string]Outage{}},
		values:         make([]valueInfo, 1, 1024),
		partIdx:        map[TopicPartition]int32{},
		lastPart:       -1,
		passes:         map[passKey]*passState{},
		commits:        map[commitKey]*commitState{},
		groupParts:     map[commitKey]*groupPart{},
		openRuns:       map[groupRunKey]*groupRun{},
		deliveryGroups: map[string]bool{},
		openFault:      map[int]int{},
		listed:         map[string]int{},
	}
}

// add lists an anomaly of kind unless its kind's list is full.
func (c *checker) add(a Anomaly) {
	if c.listed[a.Kind] >= maxListed {
		return
	}
	c.listed[a.Kind]++
	c.res.Anomalies = append(c.res.Anomalies, a)
}

// part is the index of tp's partState, created on first sight.
func (c *checker) part(topic string, partition int32) int32 {
	if c.lastPart >= 0 && c.lastTP.Partition == partition && c.lastTP.Topic == topic {
		return c.lastPart
	}
	tp := TopicPartition{topic, partition}
	i, ok := c.partIdx[tp]
	if !ok {
		i = int32(len(c.parts))
		ps := &partState{tp: tp}
		ps.slots.base = max(c.final.LogStarts[tp], 0)
		c.parts = append(c.parts, ps)
		c.partIdx[tp] = i
	}
	c.lastTP, c.lastPart = tp, i
	return i
}

// valueID is the id of the value (writer, seq), created on first sight.
func (c *checker) valueID(writer int, seq int64) int32 {
	wp := c.writers.ptr(int64(writer))
	if *wp == 0 {
		c.seqs = append(c.seqs, denseMap[int32]{})
		c.writerIDs = append(c.writerIDs, writer)
		*wp = int32(len(c.seqs))
	}
	sp := c.seqs[*wp-1].ptr(seq)
	if *sp == 0 {
		*sp = c.newValue(valueInfo{widx: *wp - 1, seq: seq})
	}
	return *sp
}

// rawID is the id of a value that does not parse.
func (c *checker) rawID(s string) int32 {
	if id, ok := c.raw[s]; ok {
		return id
	}
	if c.raw == nil {
		c.raw, c.rawText = map[string]int32{}, map[int32]string{}
	}
	id := c.newValue(valueInfo{widx: -1, flags: vRaw})
	c.raw[s], c.rawText[id] = id, s
	return id
}

func (c *checker) newValue(v valueInfo) int32 {
	v.ackOffset, v.sendTP, v.readTP, v.finalTP = -1, -1, -1, -1
	c.values = append(grow(c.values, 1), v)
	return int32(len(c.values) - 1)
}

// readID is the id of a value as a read returned it (Value.String form, padding ignored).
func (c *checker) readID(s string) int32 {
	if w, q, ok := parseValueString(s); ok {
		return c.valueID(w, q)
	}
	return c.rawID(s)
}

// text is a value as the report shows it.
func (c *checker) text(id int32) string {
	if id <= 0 || int(id) >= len(c.values) {
		return ""
	}
	v := &c.values[id]
	if v.flags&vRaw != 0 {
		return strconv.Quote(c.rawText[id])
	}
	return Value{c.writerIDs[v.widx], v.seq}.String()
}

// parseValueString is ParseValue on a string, without allocating for the usual form (two runs
// of at most 18 digits around a colon).
func parseValueString(s string) (int, int64, bool) {
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	var n [2]int64
	k, digits := 0, 0
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b >= '0' && b <= '9' && digits < 18:
			n[k] = n[k]*10 + int64(b-'0')
			digits++
		case b == ':' && k == 0 && digits > 0:
			k, digits = 1, 0
		default:
			v, ok := ParseValue([]byte(s))
			return v.Writer, v.Seq, ok
		}
	}
	if k != 1 || digits == 0 {
		return 0, 0, false
	}
	return int(n[0]), n[1], true
}

// observe records that offset off of partition p holds value id: the inconsistent check.
func (c *checker) observe(p int32, off int64, id int32, source string) {
	ps := c.parts[p]
	sl := ps.slots.ptr(off)
	switch {
	case sl.seen == 0:
		sl.seen = id
	case sl.seen != id && !ps.inconsistent[off]:
		if ps.inconsistent == nil {
			ps.inconsistent = map[int64]bool{}
		}
		ps.inconsistent[off] = true
		c.res.Inconsistent++
		c.add(Anomaly{Kind: "inconsistent", TopicPartition: ps.tp, Offset: off, Value: c.text(id),
			Detail: fmt.Sprintf("%s %s at offset %d, where %s was seen first", source, c.text(id), off, c.text(sl.seen))})
	}
}

func (c *checker) event(e *Event) error {
	switch e.Type {
	case EvSend:
		c.send(e)
	case EvRead:
		return c.read(e)
	case EvCommit:
		c.commit(e)
		c.groupCommit(e)
	case EvCommitted:
		c.committed(e)
		c.groupCommitted(e)
	case EvDeliver, EvAssign, EvRevoke, EvConsumerCrash:
		return c.groupEvent(e)
	case EvFault:
		c.res.Faults++
		c.openFault[e.ID] = len(c.faults)
		c.faults = append(c.faults, faultSpan{id: e.ID, kind: e.Fault, start: e.T, end: math.MaxInt64})
	case EvHeal:
		if i, ok := c.openFault[e.ID]; ok {
			c.faults[i].end = e.T
			delete(c.openFault, e.ID)
		}
	}
	return nil
}

func (c *checker) send(e *Event) {
	c.res.Sends++
	p := c.part(e.Topic, e.Partition)
	id := c.valueID(e.Writer, e.Seq)
	v := &c.values[id]
	if v.sendTP < 0 {
		v.sendTP = p
	}
	switch e.Outcome {
	case OK:
		c.res.Acknowledged++
		c.acks = append(grow(c.acks, 1), e.T)
		c.parts[p].acks = append(grow(c.parts[p].acks, 1), e.T)
		if v.flags&vSentOK == 0 {
			v.flags |= vSentOK
			v.sendTP = p // the partition an acknowledgement names is the one to find it in
			v.ackOffset = e.Offset
		}
		if e.Offset >= 0 {
			c.observe(p, e.Offset, id, "acknowledged")
		}
	case Failed:
		c.res.Failed++
		v.flags |= vSentFailed
	}
}

func (c *checker) read(e *Event) error {
	if len(e.Offsets) != len(e.Values) {
		return fmt.Errorf("%w: a read of %s-%d at t=%d has %d offsets and %d values",
			ErrBadEvent, e.Topic, e.Partition, e.T, len(e.Offsets), len(e.Values))
	}
	c.res.Reads += len(e.Offsets)
	if len(e.Offsets) == 0 {
		return nil
	}
	p := c.part(e.Topic, e.Partition)
	ps := c.parts[p]
	key := passKey{reader: e.Reader, pass: e.Pass, part: p}
	pst := c.passes[key]
	if pst == nil {
		pst = &passState{last: math.MinInt64}
		c.passes[key] = pst
	}
	final := e.Reader == FinalReader
	source := "reader " + strconv.Itoa(e.Reader) + " read"
	hw, hasHW := int64(0), false
	if final {
		source = "the final read has"
		hw, hasHW = c.final.HighWatermarks[ps.tp]
	}
	for i, off := range e.Offsets {
		id := c.readID(e.Values[i])
		v := &c.values[id]
		if v.readTP < 0 {
			v.readTP, v.readOff = p, off
		}
		if pst.last != math.MinInt64 {
			switch {
			case off > pst.last && uint64(off-pst.last) > 1: // off-last as unsigned cannot overflow
				c.res.Skips++
				c.add(Anomaly{Kind: "skip", TopicPartition: ps.tp, Offset: off, Value: c.text(id),
					Detail: fmt.Sprintf("reader %d pass %d read offset %d after %d (skipped %d)", e.Reader, e.Pass, off, pst.last, off-pst.last-1)})
			case off <= pst.last:
				c.res.Backward++
				c.add(Anomaly{Kind: "backward", TopicPartition: ps.tp, Offset: off, Value: c.text(id),
					Detail: fmt.Sprintf("reader %d pass %d read offset %d after %d", e.Reader, e.Pass, off, pst.last)})
			}
		}
		pst.last = off
		c.observe(p, off, id, source)
		if final && hasHW && off >= hw {
			// Read past the high watermark the final state names: it went down during the
			// read. What lies past it is not committed, so not counted found (incomplete()
			// reports the partition).
			if ps.pastHW == 0 || off < ps.pastHWMin {
				ps.pastHWMin = off
			}
			ps.pastHW++
			continue
		}
		if final {
			if sl := ps.slots.ptr(off); sl.final == 0 {
				sl.final = id
			}
			if ps.finalRecords == 0 || off < ps.finalMin {
				ps.finalMin = off
			}
			if ps.finalRecords == 0 || off > ps.finalMax {
				ps.finalMax = off
			}
			ps.finalRecords++
		}
	}
	return nil
}

func (c *checker) commit(e *Event) {
	if e.Outcome != OK {
		return
	}
	cs := c.commitState(e)
	if !cs.hasOK || e.Offset > cs.maxOK {
		cs.maxOK, cs.hasOK = e.Offset, true
	}
}

func (c *checker) committed(e *Event) {
	cs := c.commitState(e)
	tp := TopicPartition{e.Topic, e.Partition}
	switch {
	case cs.hasOK && e.Offset < cs.maxOK:
		c.res.CommitRegress++
		c.add(Anomaly{Kind: "commit-regression", TopicPartition: tp, Offset: e.Offset,
			Detail: fmt.Sprintf("group %q read back committed offset %d after committing %d", e.Group, e.Offset, cs.maxOK)})
	case cs.hasCommitted && e.Offset < cs.lastCommitted:
		c.res.CommitRegress++
		c.add(Anomaly{Kind: "commit-regression", TopicPartition: tp, Offset: e.Offset,
			Detail: fmt.Sprintf("group %q read back committed offset %d after %d", e.Group, e.Offset, cs.lastCommitted)})
	}
	cs.lastCommitted, cs.hasCommitted = e.Offset, true
}

func (c *checker) commitState(e *Event) *commitState {
	key := commitKey{e.Group, c.part(e.Topic, e.Partition)}
	cs := c.commits[key]
	if cs == nil {
		cs = &commitState{}
		c.commits[key] = cs
	}
	return cs
}
