package chaos

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// finish decides what needs the whole history, in a fixed order (partitions sorted) so that
// one history always lists the same anomalies.
func (c *checker) finish() *Result {
	r := c.res
	order := make([]int32, len(c.parts))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return compareTP(c.parts[a].tp, c.parts[b].tp) })

	c.walkFinal(order)
	c.lostAndUnexpected()
	c.incomplete()
	c.groupFinish()
	for _, d := range c.final.Divergences {
		r.Divergent++
		c.add(Anomaly{Kind: "divergent", TopicPartition: d.TopicPartition, Offset: d.Offset,
			Detail: fmt.Sprintf("broker %d differs from leader %d from offset %d: %s", d.Broker, d.Leader, d.Offset, d.Detail)})
	}
	c.outages()

	rank := map[string]int{}
	for i, k := range anomalyKinds {
		rank[k] = i
	}
	sort.SliceStable(r.Anomalies, func(i, j int) bool {
		a, b := r.Anomalies[i], r.Anomalies[j]
		if a.Kind != b.Kind {
			return rank[a.Kind] < rank[b.Kind]
		}
		if n := compareTP(a.TopicPartition, b.TopicPartition); n != 0 {
			return n < 0
		}
		return a.Offset < b.Offset
	})
	return r
}

// anomalyKinds are Anomaly.Kind's values, in the order the report lists them.
var anomalyKinds = []string{"lost", "duplicated", "inconsistent", "non-monotonic", "unexpected",
	"skip", "backward", "commit-regression", "group-missed", "group-gap", "group-repeat", "group-unowned", "divergent", "incomplete"}

func compareTP(a, b TopicPartition) int {
	if n := cmp.Compare(a.Topic, b.Topic); n != 0 {
		return n
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// walkFinal walks each partition's final read in offset order: copies (duplicated), the
// writers' order (non-monotonic), and which values are in their send partition's final read.
func (c *checker) walkFinal(order []int32) {
	r := c.res
	last := make([]int64, len(c.seqs))    // per writer index: the last seq in this partition's walk
	lastOff := make([]int64, len(c.seqs)) // and its offset
	for _, p := range order {
		ps := c.parts[p]
		if ps.finalRecords == 0 {
			continue
		}
		for i := range last {
			last[i] = -1
		}
		ps.slots.each(func(off int64, sl slot) {
			if sl.final == 0 {
				return
			}
			v := &c.values[sl.final]
			sent := v.sendTP >= 0
			v.copies++
			if v.sendTP == p {
				v.flags |= vFound
			}
			if v.copies == 1 {
				v.finalTP, v.finalOff = p, off
			} else if sent {
				r.Duplicated++
				c.add(Anomaly{Kind: "duplicated", TopicPartition: ps.tp, Offset: off, Value: c.text(sl.final),
					Detail: fmt.Sprintf("copy %d, the first at %s offset %d", v.copies, c.parts[v.finalTP].tp.name(), v.finalOff)})
			}
			if v.walkTP == p+1 || !sent {
				return // a copy of a value already seen in this partition, or no writer's
			}
			v.walkTP = p + 1
			w := v.widx
			if last[w] > v.seq {
				r.NonMonotonic++
				c.add(Anomaly{Kind: "non-monotonic", TopicPartition: ps.tp, Offset: off, Value: c.text(sl.final),
					Detail: fmt.Sprintf("after %s at offset %d", Value{c.writerIDs[w], last[w]}, lastOff[w])})
			} else {
				last[w], lastOff[w] = v.seq, off
			}
		})
	}
}

func (tp TopicPartition) name() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// lostAndUnexpected goes over the values once.
func (c *checker) lostAndUnexpected() {
	r := c.res
	for id := 1; id < len(c.values); id++ {
		v := &c.values[id]
		switch {
		case v.flags&vSentOK != 0:
			if v.flags&vFound != 0 {
				continue
			}
			r.Lost++
			ps := c.parts[v.sendTP]
			there := "nothing there"
			if got := ps.slots.get(v.ackOffset).final; got != 0 {
				there = c.text(got) + " there"
			}
			c.add(Anomaly{Kind: "lost", TopicPartition: ps.tp, Offset: v.ackOffset, Value: c.text(int32(id)),
				Detail: fmt.Sprintf("acknowledged at offset %d, not in the final read, which has %s", v.ackOffset, there)})
		case v.flags&vSentFailed != 0:
			if v.flags&vFound != 0 {
				r.FailedFound++
			}
		case v.sendTP < 0 && v.readTP >= 0:
			r.Unexpected++
			detail := "never sent"
			if v.flags&vRaw != 0 {
				detail = "not a writer's value"
			}
			c.add(Anomaly{Kind: "unexpected", TopicPartition: c.parts[v.readTP].tp, Offset: v.readOff,
				Value: c.text(int32(id)), Detail: detail})
		}
	}
}

// incomplete: a partition with a high watermark whose final read is missing or short, or
// went past the high watermark (which then went down).
func (c *checker) incomplete() {
	tps := make([]TopicPartition, 0, len(c.final.HighWatermarks))
	for tp := range c.final.HighWatermarks {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTP)
	for _, tp := range tps {
		hw, start := c.final.HighWatermarks[tp], c.final.LogStarts[tp]
		if hw <= start {
			continue
		}
		var detail string
		p, ok := c.partIdx[tp]
		switch {
		case ok && c.parts[p].pastHW > 0:
			detail = fmt.Sprintf("the final read holds %d records from offset %d, at or past the high watermark %d (it went down during the read); they are not counted as found",
				c.parts[p].pastHW, c.parts[p].pastHWMin, hw)
		case !ok || c.parts[p].finalRecords == 0:
			detail = fmt.Sprintf("no final read (log start %d, high watermark %d)", start, hw)
		case c.parts[p].finalMax+1 < hw:
			detail = fmt.Sprintf("the final read ended at offset %d, below the high watermark %d", c.parts[p].finalMax, hw)
		case c.parts[p].finalMin > start:
			detail = fmt.Sprintf("the final read began at offset %d, above the log start %d", c.parts[p].finalMin, start)
		default:
			continue
		}
		c.res.Incomplete++
		c.add(Anomaly{Kind: "incomplete", TopicPartition: tp, Offset: hw, Detail: detail})
	}
}

// outages are, per partition, the gaps between consecutive acknowledgements longer than the
// threshold, each with the fault that began it: the latest injected before the gap was a
// threshold old, else the latest injected inside it (a gap begins at the last acknowledgement
// before its fault, so the fault comes inside it; one that ends after the heal is the fault's
// recovery). LongestAll is the same over every
// partition at once: no write acknowledged anywhere.
func (c *checker) outages() {
	r := c.res
	thr := int64(c.opts.OutageThreshold)
	recovery := int64(c.opts.RecoveryWindow)
	attribute := func(o *Outage) {
		o.Fault = "none"
		// The fault that began it: the latest in force as the gap became an outage (injected
		// before the gap was a threshold old, healed no longer than the recovery window
		// before the gap began: a gap begins at the last acknowledgement before its fault);
		// else the latest injected inside the gap; else none.
		best := -1
		begin, becomes := int64(o.Start), int64(o.Start)+thr
		for j, f := range c.faults {
			inForce := f.start < becomes && (f.end == math.MaxInt64 || f.end+recovery > begin)
			if inForce && (best < 0 || f.start >= c.faults[best].start) {
				best = j
			}
		}
		if best < 0 {
			for j, f := range c.faults {
				if f.start >= begin && f.start < int64(o.End) && (best < 0 || f.start >= c.faults[best].start) {
					best = j
				}
			}
		}
		if best >= 0 {
			o.Fault, o.FaultID = c.faults[best].kind, c.faults[best].id
		}
	}
	gaps := func(acks []int64, tp TopicPartition, fn func(Outage)) {
		slices.Sort(acks)
		for i := 1; i < len(acks); i++ {
			start, end := acks[i-1], acks[i]
			if end-start <= thr {
				continue
			}
			o := Outage{TopicPartition: tp, Start: time.Duration(start), End: time.Duration(end)}
			attribute(&o)
			fn(o)
		}
	}
	for _, ps := range c.parts {
		gaps(ps.acks, ps.tp, func(o Outage) {
			r.Outages = append(r.Outages, o)
			if o.Duration() > r.Longest.Duration() {
				r.Longest = o
			}
			if prev, ok := r.LongestByFault[o.Fault]; !ok || o.Duration() > prev.Duration() {
				r.LongestByFault[o.Fault] = o
			}
		})
	}
	slices.SortFunc(r.Outages, func(a, b Outage) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	gaps(c.acks, TopicPartition{}, func(o Outage) {
		if o.Duration() > r.LongestAll.Duration() {
			r.LongestAll = o
		}
	})
}
