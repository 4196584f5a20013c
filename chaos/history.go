package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EventType names an Event's kind.
type EventType string

const (
	// EvSend is one produce of one value, recorded when its outcome is known.
	EvSend EventType = "send"
	// EvRead is records of one partition that one reader read in one poll, in order.
	EvRead EventType = "read"
	// EvCommit is one offset commit (Group, Topic, Partition, Offset: the next offset to
	// consume) with its outcome; a group consumer's also has Consumer, Generation (as the
	// consumer knew it when it committed) and Start (when the commit was called). T is when the
	// outcome was known.
	EvCommit EventType = "commit"
	// EvCommitted is one committed offset read back (OffsetFetch): Offset is what the
	// broker answered.
	EvCommitted EventType = "committed"
	// EvDeliver is records of one partition that one group consumer (Group, Consumer,
	// Generation) got from one poll, in order (Offsets[i] holds Values[i], as EvRead's), and
	// processed: they count as delivered.
	EvDeliver EventType = "deliver"
	// EvAssign is a partition given to a group consumer (the rebalance listener's
	// onPartitionsAssigned); EvRevoke is one taken from it (Detail "revoked", or "lost" when
	// the consumer learnt it was no longer a member). Group, Consumer, Generation, Topic,
	// Partition.
	EvAssign EventType = "assign"
	EvRevoke EventType = "revoke"
	// EvConsumerCrash is a group consumer (Group, Consumer) crashed by the harness (Detail says
	// how): its partitions' runs end there, and what it delivered past its last commit may be
	// delivered again to the next owner.
	EvConsumerCrash EventType = "consumer-crash"
	// EvFault is a fault injected (Fault, Targets, Detail); EvHeal is its end.
	EvFault EventType = "fault"
	EvHeal  EventType = "heal"
	// EvInfo is a note of the harness (a restart, a settle, an error of a workload).
	EvInfo EventType = "info"
)

// Outcome is a send's or commit's result as the client saw it.
type Outcome string

const (
	// OK: acknowledged (acks=all). The value must be in the log.
	OK Outcome = "ok"
	// Failed: the client gave up (an error or a delivery timeout). The value may or may not
	// be in the log: Kafka's producer cannot tell, so the checker never counts it lost, nor
	// its appearance unexpected. A failed commit may likewise have been applied.
	Failed Outcome = "fail"
	// Refused: a commit the coordinator refused (the member was not in the group's current
	// generation, or a rebalance was in progress: client.ErrCommitFailed). Not applied.
	Refused Outcome = "refused"
)

// FinalReader is the Reader id of the end-of-run full read from each partition's leader.
const FinalReader = -1

// Event is one line of history.jsonl. Times are nanoseconds since the run's start (T is when
// the event happened: a send's completion, a read's poll return, a fault's injection).
type Event struct {
	T    int64     `json:"t"`
	Type EventType `json:"type"`

	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"p,omitempty"`

	// EvSend: Writer and Seq make the value unique (Value{Writer, Seq}); Start is when the
	// send was called; Offset is the offset the broker answered (OK only, else -1).
	Writer  int     `json:"w,omitempty"`
	Seq     int64   `json:"seq,omitempty"`
	Start   int64   `json:"start,omitempty"`
	Outcome Outcome `json:"outcome,omitempty"`
	Offset  int64   `json:"offset,omitempty"`
	Err     string  `json:"err,omitempty"`

	// EvRead: Reader (FinalReader for the final read), Pass (the reader's pass from the start
	// of the partition; a pass reads to the end it saw when it began), Offsets[i] holds
	// Values[i] (Value.String form, or the raw value quoted if it does not parse).
	Reader  int      `json:"r,omitempty"`
	Pass    int      `json:"pass,omitempty"`
	Offsets []int64  `json:"offsets,omitempty"`
	Values  []string `json:"values,omitempty"`

	// EvCommit / EvCommitted / EvDeliver / EvAssign / EvRevoke / EvConsumerCrash: the group;
	// Consumer is a group consumer's id, one per consumer started (a consumer restarted after
	// a crash has a new id), counting from 1; Generation is the group generation it knew.
	Group      string `json:"group,omitempty"`
	Consumer   int    `json:"c,omitempty"`
	Generation int32  `json:"gen,omitempty"`

	// EvFault / EvHeal: Fault is the kind's name (FaultKind), ID pairs a heal with its fault,
	// Targets the node ids it concerns, Detail a sentence for the report.
	Fault   string  `json:"fault,omitempty"`
	ID      int     `json:"id,omitempty"`
	Targets []int32 `json:"targets,omitempty"`
	Detail  string  `json:"detail,omitempty"`
}

// Value is what a writer sends: unique per (Writer, Seq). Its record value is Value.String,
// padded to the workload's record size with spaces.
type Value struct {
	Writer int
	Seq    int64
}

func (v Value) String() string { return strconv.Itoa(v.Writer) + ":" + strconv.FormatInt(v.Seq, 10) }

// ParseValue parses a record value written by a writer (padding ignored).
func ParseValue(b []byte) (Value, bool) {
	s := strings.TrimRight(string(b), " ")
	w, q, ok := strings.Cut(s, ":")
	if !ok {
		return Value{}, false
	}
	wi, err1 := strconv.Atoi(w)
	qi, err2 := strconv.ParseInt(q, 10, 64)
	if err1 != nil || err2 != nil || wi < 0 || qi < 0 {
		return Value{}, false
	}
	return Value{wi, qi}, true
}

// Recorder appends events to a history. Safe for concurrent use; its mutex owns the writer.
type Recorder struct {
	start time.Time

	mu  sync.Mutex
	w   *bufio.Writer
	err error
	n   int64
}

// NewRecorder records to w; T is measured from start.
func NewRecorder(w io.Writer, start time.Time) *Recorder {
	return &Recorder{start: start, w: bufio.NewWriterSize(w, 256<<10)}
}

// Since is t as an event time.
func (r *Recorder) Since(t time.Time) int64 { return int64(t.Sub(r.start)) }

// Now is the event time of now.
func (r *Recorder) Now() int64 { return r.Since(time.Now()) }

// Record appends e, setting e.T to now if it is zero.
func (r *Recorder) Record(e Event) {
	if e.T == 0 {
		e.T = r.Now()
	}
	b, err := json.Marshal(e)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	if err == nil {
		b = append(b, '\n')
		_, err = r.w.Write(b)
	}
	if err != nil {
		r.err = fmt.Errorf("chaos: recording history: %w", err)
		return
	}
	r.n++
}

// Flush writes out what is buffered and returns the first error of any Record.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		if err := r.w.Flush(); err != nil {
			r.err = fmt.Errorf("chaos: recording history: %w", err)
		}
	}
	return r.err
}

// Events is how many events were recorded.
func (r *Recorder) Events() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// ReadHistory reads a history.jsonl, calling fn for each event in order. A line that does not
// parse is an error naming its line number.
func ReadHistory(rd io.Reader, fn func(Event) error) error {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("chaos: history line %d: %w", line, err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return sc.Err()
}
