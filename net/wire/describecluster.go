package wire

// DescribeCluster (key 60) describes the cluster: its id, the active controller and every
// registered broker with its state. It is what `sluice cluster describe` sends.
//
// Behavior: Sluice's v0 is Kafka's v0 without the tagged fields and the authorized
// operations, and with each broker's state (Kafka's v2 has IsFenced; Sluice says also whether
// the broker is shutting down) and its unix socket. Any broker answers, from the metadata log
// as it has applied it. Brokers come sorted by id.

// DescribeClusterRequest asks for the cluster's description; it has no fields.
type DescribeClusterRequest struct{}

// Key returns DescribeCluster.
func (*DescribeClusterRequest) Key() APIKey { return DescribeCluster }

// AppendTo appends the body's encoding (nothing).
func (*DescribeClusterRequest) AppendTo(dst []byte) []byte { return dst }

// ReadFrom decodes b into d (see Message): b must be empty.
func (*DescribeClusterRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	return r.done()
}

// BrokerState is a registered broker's state, as the controller sees it.
type BrokerState int8

// Broker states. A fenced broker missed its heartbeats for broker.session.timeout.ms (or has
// not caught up with the metadata log since it registered): it leads nothing. A broker
// shutting down is moving its leadership away (controlled shutdown).
const (
	BrokerAlive        BrokerState = 0
	BrokerFenced       BrokerState = 1
	BrokerShuttingDown BrokerState = 2
)

// String returns the state as the CLI prints it.
func (s BrokerState) String() string {
	switch s {
	case BrokerAlive:
		return "alive"
	case BrokerFenced:
		return "fenced"
	case BrokerShuttingDown:
		return "shutting down"
	}
	return "unknown"
}

// DescribeClusterResponse is the cluster's description.
type DescribeClusterResponse struct {
	ThrottleMs   int32
	ErrorCode    ErrorCode
	ErrorMessage *string
	ClusterID    string
	ControllerID int32 // -1 if there is no active controller
	Brokers      []DescribeClusterBroker
}

// DescribeClusterBroker is one registered broker.
type DescribeClusterBroker struct {
	BrokerID int32
	Host     string
	Port     int32
	Rack     *string
	UnixPath string // "" if it has no unix socket listener
	State    BrokerState
}

const minDescribeClusterBroker = sizeInt32 + sizeString + sizeInt32 + sizeString + sizeString + sizeInt8

// Key returns DescribeCluster.
func (*DescribeClusterResponse) Key() APIKey { return DescribeCluster }

// AppendTo appends the body's encoding.
func (d *DescribeClusterResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, d.ThrottleMs)
	dst = appendInt16(dst, int16(d.ErrorCode))
	dst = appendErrorMessage(dst, d.ErrorMessage)
	dst = appendString(dst, d.ClusterID)
	dst = appendInt32(dst, d.ControllerID)
	return appendArray(dst, d.Brokers)
}

// ReadFrom decodes b into d (see Message).
func (d *DescribeClusterResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	d.ThrottleMs = r.int32()
	d.ErrorCode = ErrorCode(r.int16())
	d.ErrorMessage = r.nullableString()
	d.ClusterID = r.stringReuse(d.ClusterID)
	d.ControllerID = r.int32()
	d.Brokers = readSlice(&r, d.Brokers, minDescribeClusterBroker)
	for i := range d.Brokers {
		br := &d.Brokers[i]
		br.BrokerID = r.int32()
		br.Host = r.stringReuse(br.Host)
		br.Port = r.int32()
		br.Rack = r.nullableString()
		br.UnixPath = r.stringReuse(br.UnixPath)
		br.State = BrokerState(r.int8())
	}
	return r.done()
}

func (br *DescribeClusterBroker) appendTo(dst []byte) []byte {
	dst = appendInt32(dst, br.BrokerID)
	dst = appendString(dst, br.Host)
	dst = appendInt32(dst, br.Port)
	dst = appendNullableString(dst, br.Rack)
	dst = appendString(dst, br.UnixPath)
	return appendInt8(dst, int8(br.State))
}
