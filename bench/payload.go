package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
)

// Payload kinds.
const (
	PayloadRandom = "random" // incompressible bytes
	PayloadText   = "text"   // JSON-like log lines, compressible as real logs are
	PayloadFile   = "file"   // the bytes of a file
)

// payloadPoolSize is the size of the pool record values are cut from: large enough that
// compression sees no artificial repetition within a batch.
const payloadPoolSize = 4 << 20

// Payload hands out record values of one size cut from a pool at successive offsets. Values
// alias the pool: senders must not modify them (Send copies them).
type Payload struct {
	pool []byte
	size int
	off  int
}

// NewPayload returns values of size bytes of the given kind; file names the file for
// PayloadFile. Random and text payloads are deterministic (fixed seeds).
func NewPayload(kind string, size int, file string) (*Payload, error) {
	if size <= 0 {
		return nil, fmt.Errorf("bench: record size %d: must be positive", size)
	}
	n := max(payloadPoolSize, 2*size)
	var pool []byte
	switch kind {
	case PayloadRandom, "":
		pool = make([]byte, n)
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i+8 <= n; i += 8 {
			u := r.Uint64()
			for j := range 8 {
				pool[i+j] = byte(u >> (8 * j))
			}
		}
	case PayloadText:
		pool = TextPayload(n)
	case PayloadFile:
		if file == "" {
			return nil, errors.New("bench: payload file: no file named (--payload-file, or payloadFile in a workload)")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("bench: payload file: %w", err)
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("bench: payload file %s is empty", file)
		}
		for len(pool) < n {
			pool = append(pool, b...)
		}
	default:
		return nil, fmt.Errorf("bench: unknown payload %q (want random, text or file)", kind)
	}
	return &Payload{pool: pool, size: size}, nil
}

// Size is the size of every value.
func (p *Payload) Size() int { return p.size }

// Next returns the next value.
func (p *Payload) Next() []byte {
	if p.off+p.size > len(p.pool) {
		p.off = 0
	}
	v := p.pool[p.off : p.off+p.size]
	p.off += p.size
	return v
}

// Clone returns a Payload over the same pool for another producer, starting elsewhere.
func (p *Payload) Clone(seed int) *Payload {
	return &Payload{pool: p.pool, size: p.size, off: (seed * 7919 * p.size) % (len(p.pool) - p.size + 1)}
}

var (
	textLevels   = []string{"INFO", "INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"}
	textServices = []string{"checkout", "payments", "inventory", "search", "auth", "gateway", "shipping"}
	textMethods  = []string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}
	textPaths    = []string{"/api/v1/orders/", "/api/v1/users/", "/api/v2/cart/", "/healthz", "/api/v1/items/", "/login"}
	textStatus   = []int{200, 200, 200, 200, 201, 204, 304, 400, 404, 500}
	textMsgs     = []string{"request served", "cache miss, loading from store", "slow downstream call", "retrying after timeout", "user session refreshed", "payment authorised"}
)

// TextPayload returns n bytes of deterministic JSON-like log lines, one per line, as an
// application's structured logs look: repeated keys, a few enumerations, numbers and ids.
func TextPayload(n int) []byte {
	r := rand.New(rand.NewPCG(42, 7))
	ts := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	out := make([]byte, 0, n+512)
	for len(out) < n {
		ts = ts.Add(time.Duration(r.IntN(5000)) * time.Microsecond)
		out = append(out, `{"ts":"`...)
		out = ts.AppendFormat(out, "2006-01-02T15:04:05.000000Z")
		out = append(out, `","level":"`...)
		out = append(out, textLevels[r.IntN(len(textLevels))]...)
		out = append(out, `","service":"`...)
		out = append(out, textServices[r.IntN(len(textServices))]...)
		out = append(out, `","host":"web-`...)
		out = strconv.AppendInt(out, int64(r.IntN(32)), 10)
		out = append(out, `","trace_id":"`...)
		out = strconv.AppendUint(out, r.Uint64(), 16)
		out = append(out, `","method":"`...)
		out = append(out, textMethods[r.IntN(len(textMethods))]...)
		out = append(out, `","path":"`...)
		out = append(out, textPaths[r.IntN(len(textPaths))]...)
		out = strconv.AppendInt(out, int64(r.IntN(100000)), 10)
		out = append(out, `","status":`...)
		out = strconv.AppendInt(out, int64(textStatus[r.IntN(len(textStatus))]), 10)
		out = append(out, `,"duration_ms":`...)
		out = strconv.AppendFloat(out, r.ExpFloat64()*12, 'f', 3, 64)
		out = append(out, `,"user_id":`...)
		out = strconv.AppendInt(out, int64(r.IntN(1_000_000)), 10)
		out = append(out, `,"msg":"`...)
		out = append(out, textMsgs[r.IntN(len(textMsgs))]...)
		out = append(out, "\"}\n"...)
	}
	return out[:n]
}
