// Package client is Sluice's Go client: Producer, Consumer and Admin over a cluster, on top of a
// transport with one address form for both kinds of socket ("host:port" for TCP,
// "unix:///path" or a plain path for the unix socket) and connections that pipeline requests,
// matching responses to callers by correlation id.
//
//   - Client (client.go): bootstrap (Config.Brokers in order, each until one answers), metadata
//     cache (metadata.max.age.ms, refreshed on NOT_LEADER_OR_FOLLOWER and
//     UNKNOWN_TOPIC_OR_PARTITION, corrected at once by KIP-951 leader hints; a refresh never
//     puts back a leader of an older epoch), one connection per broker, each asking ApiVersions
//     first (Produce and Fetch v1 where spoken), all dialled through Config.Dial; a client
//     bootstrapped over a unix socket reaches every broker through the socket it advertises.
//     A broker that does not answer within request.timeout.ms fails naming itself
//     (NoAnswerError); broker error codes read "description (CODE): broker's message"
//     (errors.go).
//   - Producer (producer.go, accumulator.go, partitioner.go, sender.go): Kafka's partitioner,
//     record accumulator (batch.size, linger.ms, buffer.memory, max.block.ms), one sender per
//     broker, retries until delivery.timeout.ms. See PRODUCER.md for the ordering guarantee.
//   - Consumer (consumer.go, fetcher.go, fetchbuf.go, offsets.go): assign, seek, poll with the
//     next fetch in flight, committed offsets (sync, async, auto), and optionally reused fetch
//     and decompression buffers (ReuseRecordBuffers). See CONSUMER.md for what each commit mode
//     guarantees across a crash.
//   - Admin (admin.go): topics and their configs.
//
// Concurrency: a Conn is safe for concurrent use. Writes are serialised by its write lock, so
// requests go out in the order their correlation ids were assigned; one reader goroutine owns
// the socket's read side and hands each response to the caller waiting for it. Close stops the
// reader and fails every outstanding call. Producer and Consumer document their goroutines;
// Close on each waits for them.
package client
