package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// replicaConn is a replica fetcher's connection to its leader: plain request and response,
// one at a time, over net/wire frames (the broker does not import client/). Every write and
// every read has a deadline, so a leader that stops answering (paused, partitioned) costs the
// fetcher at most the request's bound, never a hang. Responses are read into one buffer,
// reused from request to request and never larger than maxFrame: a decoded response (its
// records) aliases it until the next roundTrip.
//
// Owned by one fetcher goroutine; not safe for concurrent use.
type replicaConn struct {
	nc       net.Conn
	stop     func() bool // unregisters the close on the fetchers' shutdown
	clientID string
	corr     int32
	maxFrame int
	out      []byte // the request being written, reused
	in       []byte // the response frame, reused
	// fetchVersion is the Fetch version both ends speak (ApiVersions at dial): 2 carries the
	// durable offset and fetch sessions, 1 neither.
	fetchVersion int16
	// epochQueries says the leader takes OffsetForLeaderEpoch.
	epochQueries bool
}

// errReplicaConn marks an error of the connection itself (dial, deadline, framing): the
// fetcher closes the connection and backs off.
var errReplicaConn = errors.New("broker: replica fetcher connection")

// replicaFetchMaxVersion is the newest Fetch version a replica fetcher sends.
const replicaFetchMaxVersion int16 = 2

// dialReplica connects to addr and learns the versions the leader speaks.
func dialReplica(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error),
	addr string, self int32, maxFrame int, timeout time.Duration) (*replicaConn, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := dial(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", errReplicaConn, addr, err)
	}
	c := &replicaConn{nc: nc, clientID: "sluice-replica-fetcher-" + strconv.Itoa(int(self)), maxFrame: maxFrame}
	// Shutdown closes the connection: a round trip blocked on a silent leader returns at once
	// rather than at its deadline.
	c.stop = context.AfterFunc(ctx, func() { _ = nc.Close() })
	var vr wire.APIVersionsResponse
	if err := c.roundTrip(&wire.APIVersionsRequest{}, &vr, timeout); err != nil {
		c.close()
		return nil, err
	}
	if vr.ErrorCode != wire.NoError {
		c.close()
		return nil, fmt.Errorf("%w: ApiVersions from %s: %s", errReplicaConn, addr, vr.ErrorCode)
	}
	c.fetchVersion = -1
	for _, k := range vr.APIKeys {
		switch k.APIKey {
		case wire.Fetch:
			if k.MinVersion <= 1 && k.MaxVersion >= 1 {
				c.fetchVersion = min(k.MaxVersion, replicaFetchMaxVersion)
			}
		case wire.OffsetForLeaderEpoch:
			c.epochQueries = true
		}
	}
	if c.fetchVersion < 0 {
		c.close()
		return nil, fmt.Errorf("%w: %s does not speak Fetch v1 or later", errReplicaConn, addr)
	}
	return c, nil
}

// roundTrip sends req and decodes its response into resp, within timeout for the write and
// again for the read.
func (c *replicaConn) roundTrip(req wire.Request, resp wire.Response, timeout time.Duration) error {
	c.corr++
	h := wire.RequestHeader{APIKey: req.Key(), APIVersion: wire.VersionOf(req), CorrelationID: c.corr, ClientID: c.clientID}
	c.out = wire.AppendRequestFrame(c.out[:0], &h, req)
	if err := c.nc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("%w: %w", errReplicaConn, err)
	}
	if _, err := c.nc.Write(c.out); err != nil {
		return fmt.Errorf("%w: write %s: %w", errReplicaConn, h.APIKey, err)
	}
	if cap(c.out) > 1<<20 {
		c.out = nil // a rare large request (thousands of partitions) is not kept
	}
	var size [wire.FrameSizeLen]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return fmt.Errorf("%w: read %s response: %w", errReplicaConn, h.APIKey, err)
	}
	n, err := wire.ReadResponseFrameSize(size, c.maxFrame)
	if err != nil {
		return fmt.Errorf("%w: %s response of %d bytes (at most %d): %w", errReplicaConn, h.APIKey,
			int32(binary.BigEndian.Uint32(size[:])), c.maxFrame, err)
	}
	if cap(c.in) < n {
		c.in = make([]byte, n)
	}
	c.in = c.in[:n]
	if _, err := io.ReadFull(c.nc, c.in); err != nil {
		return fmt.Errorf("%w: read %s response: %w", errReplicaConn, h.APIKey, err)
	}
	var rh wire.ResponseHeader
	body, err := rh.ReadFrom(c.in)
	if err != nil {
		return fmt.Errorf("%w: %s response header: %w", errReplicaConn, h.APIKey, err)
	}
	if rh.CorrelationID != h.CorrelationID {
		return fmt.Errorf("%w: %s response has correlation id %d, want %d", errReplicaConn, h.APIKey, rh.CorrelationID, h.CorrelationID)
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: %s response: %w", errReplicaConn, h.APIKey, err)
	}
	return nil
}

// close closes the connection; a fetcher blocked in roundTrip returns at once.
func (c *replicaConn) close() {
	if c != nil && c.nc != nil {
		c.stop()
		_ = c.nc.Close()
	}
}
