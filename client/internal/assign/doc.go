// Package assign holds the consumer group partition assignors the client's group leader runs:
// Kafka's "range", "roundrobin" and "cooperative-sticky". They are pure functions of their input,
// with no I/O, no clock and no state between calls.
//
// # Input
//
// Members carry their subscription (topics), and, for the cooperative protocol, the partitions
// they own going into the rebalance with the generation of that ownership. The partitions map
// gives each topic's partition count. Topics nobody subscribes to, subscribed topics missing from
// the map, and owned partitions outside [0, count) are ignored.
//
// Members are ordered as Kafka orders them since KIP-345: members with an instance id first, by
// instance id, then the others by member id (member id breaks instance id ties). Every order in
// the algorithms derives from this one and from (topic, partition), never from the order of the
// input slice.
//
// # Invariants (pinned by assign_test.go and property_test.go)
//
//   - Deterministic: the same members in any order and the same map give the same result.
//   - Every member appears in the result, possibly with no partitions; results are sorted by topic,
//     partitions ascending.
//   - No member is given a partition of a topic it does not subscribe to.
//   - Eager assignors (range, roundrobin) give every subscribed partition to exactly one member.
//   - cooperative-sticky gives every subscribed partition to at most one member. It first computes
//     a sticky, balanced target: members keep the partitions they own while balance allows, the
//     others go to the least loaded eligible member, and partitions then move from the most to the
//     least loaded member until no member holds two more than another member that could take one
//     of its partitions; in particular, counts differ by at most one among members with identical
//     subscriptions. Between members with different subscriptions only partitions the donor does
//     not own move, so balance across subscriptions is best effort. A partition balance took from
//     its owner goes back to it when a chain of unowned partitions can make up the difference.
//     Then the cooperative adjustment: a partition whose target differs from its current owner
//     (a member of this group, whether or not it still subscribes) is withheld, left unassigned
//     this round; its owner revokes it and rejoins, and the next rebalance hands it over.
//   - Convergence: with identical subscriptions, applying a result as the ownership and
//     assigning again yields a complete, balanced assignment. With different subscriptions a
//     third rebalance is sometimes needed (about 1 random group in 500 in the tests).
//   - Conflicting ownership claims: the claim with the highest Generation wins; equal generations
//     go to the first member in the order above. A losing claim counts for nothing.
package assign
