package chaos

import (
	"strconv"
	"strings"
	"time"
)

// verdict is Result.Verdict: the counts that always show, then every other kind not zero, then
// the longest outage.
func verdict(r *Result, elapsed time.Duration) string {
	if elapsed >= time.Second {
		elapsed = elapsed.Round(time.Second)
	}
	var b strings.Builder
	b.WriteString(plural(r.Faults, "fault", "faults"))
	b.WriteString(" in ")
	b.WriteString(elapsed.String())
	b.WriteString(": ")
	b.WriteString(thousands(r.Acknowledged))
	b.WriteString(" acknowledged, ")
	b.WriteString(thousands(r.Lost))
	b.WriteString(" lost, ")
	b.WriteString(thousands(r.Duplicated))
	b.WriteString(" duplicated")
	if r.Duplicated > 0 && !r.Options.Idempotent {
		b.WriteString(" (retries without idempotence)")
	}
	b.WriteString(", ")
	b.WriteString(thousands(r.Inconsistent))
	b.WriteString(" inconsistent, ")
	b.WriteString(thousands(r.Divergent))
	b.WriteString(" divergent")
	if r.GroupDelivered > 0 {
		b.WriteString(", ")
		b.WriteString(thousands(r.GroupDelivered))
		b.WriteString(" delivered to the group (")
		b.WriteString(thousands(r.Redelivered))
		b.WriteString(" redelivered, ")
		b.WriteString(plural(r.GroupCrashes, "consumer crash", "consumer crashes"))
		b.WriteString(")")
	}
	unordered := ""
	if !r.Options.Ordered {
		unordered = " (ordering not promised)"
	}
	for _, k := range []struct {
		n              int
		one, many, why string
	}{
		{r.NonMonotonic, "non-monotonic", "non-monotonic", unordered},
		{r.Unexpected, "unexpected", "unexpected", ""},
		{r.Skips, "skip", "skips", ""},
		{r.Backward, "backward", "backward", ""},
		{r.CommitRegress, "commit regression", "commit regressions", ""},
		{r.GroupMissed, "missed by the group", "missed by the group", ""},
		{r.GroupGaps, "group gap", "group gaps", ""},
		{r.GroupRepeats, "group repeat", "group repeats", ""},
		{r.GroupUnowned, "delivery not owned", "deliveries not owned", ""},
		{r.Incomplete, "incomplete", "incomplete", ""},
	} {
		if k.n > 0 {
			b.WriteString(", ")
			b.WriteString(plural(k.n, k.one, k.many))
			b.WriteString(k.why)
		}
	}
	b.WriteString("; ")
	if len(r.Outages) == 0 {
		b.WriteString("no outage over ")
		b.WriteString(seconds(r.Options.OutageThreshold))
	} else {
		b.WriteString("longest outage ")
		b.WriteString(seconds(r.Longest.Duration()))
		b.WriteString(" (")
		b.WriteString(r.Longest.Fault)
		b.WriteString(")")
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}

// seconds is d as "3.1 s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
}

// thousands is n with a comma between each group of three digits: 61,234.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := ""
	if n < 0 {
		neg, s = "-", s[1:]
	}
	if len(s) <= 3 {
		return neg + s
	}
	var b strings.Builder
	b.WriteString(neg)
	head := len(s) % 3
	if head > 0 {
		b.WriteString(s[:head])
	}
	for i := head; i < len(s); i += 3 {
		if b.Len() > len(neg) {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}
