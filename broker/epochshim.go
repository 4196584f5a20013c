package broker

import "github.com/sluicemq/sluice/net/wire"

// epochQueryMessages is the OffsetForLeaderEpoch request and response as wire messages, until
// net/wire has their codec (issue #23 stream C): false without it.
//
// Temporary: goes once the codec is on main.
func epochQueryMessages(req *wire.OffsetForLeaderEpochRequest, resp *wire.OffsetForLeaderEpochResponse) (wire.Request, wire.Response, bool) {
	rq, ok1 := any(req).(wire.Request)
	rs, ok2 := any(resp).(wire.Response)
	return rq, rs, ok1 && ok2
}
