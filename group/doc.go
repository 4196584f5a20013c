// Package group is the pure per-group state machine of Kafka's classic consumer group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), with KIP-345 static members,
// KIP-394 MEMBER_ID_REQUIRED and KIP-814 SkipAssignment.
//
// It is pure: no goroutines, no I/O, no clock reads, no locks; the time is an argument of
// every call. One *Group exists per group id and is owned by the broker's group
// coordinator, which calls it only under the mutex of the shard holding the group; a
// *Group is not safe for concurrent use.
//
// States and transitions (Kafka's names):
//
//	Empty ──first join──▶ PreparingRebalance ──all rejoined / rebalance timeout──▶ CompletingRebalance
//	  ▲                     ▲        │ no member left                                   │ leader's sync
//	  └─────────────────────┼────────┘                                                  ▼
//	                        └──── join with new metadata, leave, session expiry ──── Stable
//	any state ──MarkDead──▶ Dead
//
// Members leave by LeaveGroup, by their session timeout (not while a join or sync of theirs
// is parked), by not rejoining before the rebalance timeout, or by not sending SyncGroup
// within the rebalance timeout after the join completed. A new dynamic member first gets
// MEMBER_ID_REQUIRED and stays pending (holding up the join) until it rejoins or its session
// timeout passes. From Empty the join waits InitialRebalanceDelay, extended by the delay
// while new members arrive, up to the rebalance timeout.
//
// A request that cannot be answered at once (a join waiting for the others, a sync waiting
// for the leader) is parked: the call returns a nil response and the answer comes later in
// Effects.Replies, addressed by member id. The coordinator delivers the Replies of an
// Effects before it parks the request that produced it, so a member's earlier parked join,
// answered ErrRebalanceInProgress when the member joins again, reaches the earlier request.
// When Effects.Persist is set, the Replies are delivered only after the record is committed
// to __consumer_offsets; if the write fails the coordinator calls PersistFailed instead and
// delivers the Replies that returns.
//
// Record format (the snapshot in __consumer_offsets; Kafka's GroupMetadataKey v2 and
// GroupMetadataValue v3, non-flexible, big-endian; strings are i16 length + bytes, nullable
// strings use length -1, bytes are i32 length + bytes):
//
//	key:    i16 version=2 | string group
//	value:  i16 version=3 | string protocolType | i32 generation | nullable string protocol |
//	        nullable string leader | i64 currentStateTimestamp (ms) | i32 member count |
//	        members...
//	member: string memberId | nullable string groupInstanceId | string clientId |
//	        string clientHost | i32 rebalanceTimeoutMs | i32 sessionTimeoutMs |
//	        bytes subscription | bytes assignment
//
// A nil value (tombstone) means the group was deleted. Value versions 0 to 2 are read too.
package group
