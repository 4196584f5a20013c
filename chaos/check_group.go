package chaos

import (
	"fmt"
	"slices"
	"strconv"
)

// The group checks (see Check for the definitions): per group partition, every delivery's
// offset (how many times it was delivered), the commits with their times, and the runs: one
// consumer's deliveries of one partition from an EvAssign to the EvRevoke (or its crash).
// A run's start is judged at the end, against the commits made before it, since an event's
// time and its place in the file may differ by a little.

type groupPart struct {
	tp        TopicPartition
	part      int32
	group     string
	delivered denseMap[int32] // offset → deliveries
	commits   []groupCommit   // OK and Failed; Refused ones were not applied
	runs      []*groupRun
	final     int64 // the committed offset read back last (EvCommitted)
	hasFinal  bool
}

type groupCommit struct {
	start, t, offset int64
	ok               bool
}

// groupRun is one consumer's deliveries of one partition within one assignment.
type groupRun struct {
	consumer     int
	generation   int32
	assignT      int64 // the EvAssign's time (the first delivery's, without one)
	firstT       int64
	first, last  int64
	started      bool
	firstUnowned bool // delivered without an EvAssign
}

type groupRunKey struct {
	group    string
	consumer int
	part     int32
}

func (c *checker) groupPart(group string, p int32) *groupPart {
	key := commitKey{group, p}
	gp := c.groupParts[key]
	if gp == nil {
		gp = &groupPart{tp: c.parts[p].tp, part: p, group: group}
		gp.delivered.base = max(c.final.LogStarts[gp.tp], 0)
		c.groupParts[key] = gp
	}
	return gp
}

func (c *checker) groupEvent(e *Event) error {
	switch e.Type {
	case EvAssign:
		p := c.part(e.Topic, e.Partition)
		gp := c.groupPart(e.Group, p)
		run := &groupRun{consumer: e.Consumer, generation: e.Generation, assignT: e.T}
		gp.runs = append(gp.runs, run)
		c.openRuns[groupRunKey{e.Group, e.Consumer, p}] = run
	case EvRevoke:
		delete(c.openRuns, groupRunKey{e.Group, e.Consumer, c.part(e.Topic, e.Partition)})
	case EvConsumerCrash:
		c.res.GroupCrashes++
		for k := range c.openRuns {
			if k.group == e.Group && k.consumer == e.Consumer {
				delete(c.openRuns, k)
			}
		}
	case EvDeliver:
		return c.deliver(e)
	}
	return nil
}

func (c *checker) deliver(e *Event) error {
	if len(e.Offsets) != len(e.Values) {
		return fmt.Errorf("%w: a delivery of %s-%d at t=%d has %d offsets and %d values",
			ErrBadEvent, e.Topic, e.Partition, e.T, len(e.Offsets), len(e.Values))
	}
	if len(e.Offsets) == 0 {
		return nil
	}
	c.res.GroupDelivered += len(e.Offsets)
	c.deliveryGroups[e.Group] = true
	p := c.part(e.Topic, e.Partition)
	gp := c.groupPart(e.Group, p)
	key := groupRunKey{e.Group, e.Consumer, p}
	run := c.openRuns[key]
	if run == nil {
		// Not given the partition, or given it up: the client returned records it does not
		// own. The run is judged as one from here.
		c.res.GroupUnowned++
		c.add(Anomaly{Kind: "group-unowned", TopicPartition: gp.tp, Offset: e.Offsets[0], Value: c.text(c.readID(e.Values[0])),
			Detail: fmt.Sprintf("group %q consumer %d (generation %d) delivered offsets %d to %d of a partition it had not been given, or had given up",
				e.Group, e.Consumer, e.Generation, e.Offsets[0], e.Offsets[len(e.Offsets)-1])})
		run = &groupRun{consumer: e.Consumer, generation: e.Generation, assignT: e.T, firstUnowned: true}
		gp.runs = append(gp.runs, run)
		c.openRuns[key] = run
	}
	source := "group consumer " + strconv.Itoa(e.Consumer) + " delivered"
	for i, off := range e.Offsets {
		id := c.readID(e.Values[i])
		if v := &c.values[id]; v.readTP < 0 {
			v.readTP, v.readOff = p, off
		}
		c.observe(p, off, id, source)
		switch {
		case !run.started:
			run.started, run.first, run.firstT = true, off, e.T
		case off > run.last && uint64(off-run.last) > 1:
			c.res.GroupGaps++
			c.add(Anomaly{Kind: "group-gap", TopicPartition: gp.tp, Offset: off, Value: c.text(id),
				Detail: fmt.Sprintf("group %q consumer %d (generation %d) delivered offset %d after %d, skipping %d, with no rebalance between",
					e.Group, e.Consumer, e.Generation, off, run.last, off-run.last-1)})
		case off <= run.last:
			c.res.GroupRepeats++
			c.add(Anomaly{Kind: "group-repeat", TopicPartition: gp.tp, Offset: off, Value: c.text(id),
				Detail: fmt.Sprintf("group %q consumer %d (generation %d) delivered offset %d again after %d, with no rebalance between",
					e.Group, e.Consumer, e.Generation, off, run.last)})
		}
		run.last = off
		n := gp.delivered.ptr(off)
		if *n > 0 {
			c.res.Redelivered++
		}
		*n++
	}
	return nil
}

// groupCommit notes a commit that may have been applied (OK or Failed).
func (c *checker) groupCommit(e *Event) {
	if e.Outcome != OK && e.Outcome != Failed {
		return
	}
	gp := c.groupPart(e.Group, c.part(e.Topic, e.Partition))
	start := e.Start
	if start == 0 || start > e.T {
		start = e.T
	}
	gp.commits = append(gp.commits, groupCommit{start: start, t: e.T, offset: e.Offset, ok: e.Outcome == OK})
}

func (c *checker) groupCommitted(e *Event) {
	gp := c.groupPart(e.Group, c.part(e.Topic, e.Partition))
	gp.final, gp.hasFinal = e.Offset, true
}

// groupFinish judges every run's start against the commits before it, then the final
// committed offsets: every acknowledged record below one delivered, and none past the high
// watermark. The group partitions go in a fixed order.
func (c *checker) groupFinish() {
	gps := make([]*groupPart, 0, len(c.groupParts))
	for _, gp := range c.groupParts {
		gps = append(gps, gp)
	}
	slices.SortFunc(gps, func(a, b *groupPart) int {
		if n := compareTP(a.tp, b.tp); n != 0 {
			return n
		}
		if a.group < b.group {
			return -1
		}
		if a.group > b.group {
			return 1
		}
		return 0
	})
	for _, gp := range gps {
		c.groupRuns(gp)
	}
	// At least once: per partition, the groups that read a committed offset back.
	byPart := map[int32][]*groupPart{}
	for _, gp := range gps {
		if gp.hasFinal && c.deliveryGroups[gp.group] {
			byPart[gp.part] = append(byPart[gp.part], gp)
			if hw, ok := c.final.HighWatermarks[gp.tp]; ok && gp.final > hw {
				c.res.GroupGaps++
				c.add(Anomaly{Kind: "group-gap", TopicPartition: gp.tp, Offset: gp.final,
					Detail: fmt.Sprintf("group %q committed offset %d, past the high watermark %d", gp.group, gp.final, hw)})
			}
		}
	}
	if len(byPart) == 0 {
		return
	}
	for id := 1; id < len(c.values); id++ {
		v := &c.values[id]
		if v.flags&vSentOK == 0 || v.ackOffset < 0 {
			continue
		}
		for _, gp := range byPart[v.sendTP] {
			if v.ackOffset < gp.final && gp.delivered.get(v.ackOffset) == 0 {
				c.res.GroupMissed++
				c.add(Anomaly{Kind: "group-missed", TopicPartition: gp.tp, Offset: v.ackOffset, Value: c.text(int32(id)),
					Detail: fmt.Sprintf("acknowledged at offset %d, below group %q's committed offset %d, and never delivered to one of its consumers", v.ackOffset, gp.group, gp.final)})
			}
		}
	}
}

// groupRuns: a run begins where the group's committed offset was when the consumer got the
// partition. That offset is at least lo, the highest committed with OK before the assignment
// (its answer came before), and at most hi, the highest any commit not refused had asked for
// before the run's first delivery (one that failed may have been applied); the log start when
// nothing was committed. A start below lo delivers committed records again (group-repeat); one
// above hi skips records nobody committed (group-gap).
func (c *checker) groupRuns(gp *groupPart) {
	logStart := max(c.final.LogStarts[gp.tp], 0)
	for _, run := range gp.runs {
		if !run.started {
			continue
		}
		lo, hi := logStart, logStart
		loFrom, hiFrom := "the log start", "the log start"
		for _, cm := range gp.commits {
			if cm.ok && cm.t <= run.assignT && cm.offset > lo {
				lo, loFrom = cm.offset, fmt.Sprintf("committed at t=%s", fmtNanos(cm.t))
			}
			if cm.start <= run.firstT && cm.offset > hi {
				hi, hiFrom = cm.offset, fmt.Sprintf("asked for at t=%s", fmtNanos(cm.start))
			}
		}
		hi = max(hi, lo)
		how := fmt.Sprintf("given the partition at t=%s", fmtNanos(run.assignT))
		if run.firstUnowned {
			how = "with no assignment recorded"
		}
		switch {
		case run.first < lo:
			c.res.GroupRepeats++
			c.add(Anomaly{Kind: "group-repeat", TopicPartition: gp.tp, Offset: run.first,
				Detail: fmt.Sprintf("group %q consumer %d (generation %d), %s, began at offset %d, below offset %d (%s): offsets %d to %d, committed, delivered again",
					gp.group, run.consumer, run.generation, how, run.first, lo, loFrom, run.first, min(lo, run.last+1)-1)})
		case run.first > hi:
			c.res.GroupGaps++
			c.add(Anomaly{Kind: "group-gap", TopicPartition: gp.tp, Offset: run.first,
				Detail: fmt.Sprintf("group %q consumer %d (generation %d), %s, began at offset %d, past the committed offset, at most %d (%s): offsets %d to %d skipped",
					gp.group, run.consumer, run.generation, how, run.first, hi, hiFrom, hi, run.first-1)})
		}
	}
}

// fmtNanos is an event time in seconds with milliseconds: "12.345".
func fmtNanos(t int64) string { return strconv.FormatFloat(float64(t)/1e9, 'f', 3, 64) }
