// Package reassign holds what kafka-reassign-partitions and kafka-leader-election read and
// write, and the plan generator behind `sluice reassign generate`. It is pure: no I/O, no
// clock, no cluster; the CLI feeds it the current assignment and prints what it returns.
//
// # Files
//
// Kafka's JSON, so that files written for Kafka's tools work unchanged:
//
//	topics to move   {"version":1,"topics":[{"topic":"foo"}]}
//	reassignment     {"version":1,"partitions":[{"topic":"foo","partition":0,
//	                   "replicas":[1,2],"log_dirs":["any","any"]}]}
//	leader election  {"partitions":[{"topic":"foo","partition":1}]}
//
// "version" may be left out (Kafka then takes 1) and must be 1; "log_dirs" may be left out
// ("any" per replica). Parsing is stricter than Kafka's in one way: a field Kafka does not
// read, or one given twice, is refused, since it is a typo more often than not. Every error is
// a *ParseError with the line and column and the field ("partitions[3].replicas[1]"). Plan's
// Format prints Kafka's one-line shape, the partitions sorted by topic and partition.
//
// # Generate
//
// Given each partition's current replicas and the brokers to use, Generate proposes replica
// lists that, in order of priority:
//
//  1. keep each partition's replication factor, never put a broker twice in one partition,
//     and use only the listed brokers;
//  2. balance replicas: per broker, the counts differ by at most one, over the whole plan and
//     within each topic (both at once are always possible);
//  3. move as few replicas as possible (a moved replica is a broker in the new list that is
//     not in the old one: data to copy): a replica on a listed broker stays unless balance
//     needs it elsewhere;
//  4. balance preferred leaders (first replicas) the same way, per topic and overall, as far
//     as the replica lists allow, keeping a partition's current preferred leader when it can.
//     Copying data outranks leader balance: a partition of one replica has no choice of
//     leader, and its replica is not moved for the leaders' sake, so a plan that mixes
//     replication factors may leave leaders further apart (with one replication factor
//     throughout, the property test always finds them balanced).
//
// Kafka's generator places each topic afresh, round robin from a random broker, and so moves
// nearly everything; this one is optimal for 2 and 3. It solves two min-cost flows: first the
// replica lists (each unit of flow is one replica, partition → (topic, broker) → broker →
// sink; a replica costs 1 unless its broker has it now; the per-broker links are tiered, the
// even share's floor at no cost, one unit more at a large cost, anything beyond at twice
// that, so the cheapest flow is balanced first and moves least second); then the preferred
// leaders the same way over each partition's new replicas. A kept replica keeps its place in
// the list and new replicas take the places of those that left; the leader then goes first.
// The seed only orders the brokers and partitions as the solver sees them: the same input and
// seed give the same plan, and another seed may give another plan only among equally good
// ones. The flows are solved primal-dual (flow.go): a few shortest-path phases, each followed
// by blocking flows; 3,000 partitions of RF 3 moving from 6 brokers to 9 take about 30 ms
// (BenchmarkGenerate).
package reassign
