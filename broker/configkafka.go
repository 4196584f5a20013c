package broker

import (
	"slices"
	"strings"
)

// kafkaIgnored are Kafka broker properties (Kafka 3.x and 4.x's broker configs) that have no
// effect in Sluice: thread pools and socket buffers (Sluice sizes its own goroutines and leaves
// buffers to the kernel), the replication of internal topics it does not have (transactions,
// share groups), group-coordinator and quota tuning, metrics reporters, remote storage, and
// the security settings of protocols it does not speak (a listener using SSL or SASL is
// refused, so their settings cannot take effect). ReadProperties accepts them and the caller
// lists them once at start, so that a Kafka quick start's server.properties is taken as a
// whole. A key that changes what is stored (log.cleanup.policy=compact, compression.type) is
// not here: the registry takes only the value Sluice implements.
//
// Sorted; kafkaIgnoredPrefixes covers the families.
var kafkaIgnored = []string{
	"alter.config.policy.class.name",
	"alter.log.dirs.replication.quota.window.num",
	"alter.log.dirs.replication.quota.window.size.seconds",
	"authorizer.class.name",
	"auto.include.jmx.reporter",
	"background.threads",
	"broker.rack",
	"client.quota.callback.class",
	"compression.gzip.level",
	"compression.lz4.level",
	"compression.zstd.level",
	"connection.failed.authentication.delay.ms",
	"connections.max.reauth.ms",
	"controlled.shutdown.max.retries",
	"controlled.shutdown.retry.backoff.ms",
	"controller.quorum.append.linger.ms",
	"controller.quorum.election.backoff.max.ms",
	"controller.quorum.election.timeout.ms",
	"controller.quorum.fetch.timeout.ms",
	"controller.quorum.request.timeout.ms",
	"controller.quorum.retry.backoff.ms",
	"controller.socket.timeout.ms",
	"create.topic.policy.class.name",
	"delegation.token.expiry.check.interval.ms",
	"delete.records.purgatory.purge.interval.requests",
	"delete.topic.enable",
	"early.start.listeners",
	"fetch.max.bytes",
	"fetch.purgatory.purge.interval.requests",
	"group.consumer.heartbeat.interval.ms",
	"group.consumer.max.heartbeat.interval.ms",
	"group.consumer.max.session.timeout.ms",
	"group.consumer.max.size",
	"group.consumer.min.heartbeat.interval.ms",
	"group.consumer.min.session.timeout.ms",
	"group.consumer.session.timeout.ms",
	"group.coordinator.rebalance.protocols",
	"group.coordinator.threads",
	"initial.broker.registration.timeout.ms",
	"log.cleaner.backoff.ms",
	"log.cleaner.dedupe.buffer.size",
	"log.cleaner.delete.retention.ms",
	"log.cleaner.enable",
	"log.cleaner.io.buffer.load.factor",
	"log.cleaner.io.buffer.size",
	"log.cleaner.io.max.bytes.per.second",
	"log.cleaner.max.compaction.lag.ms",
	"log.cleaner.min.cleanable.ratio",
	"log.cleaner.min.compaction.lag.ms",
	"log.cleaner.threads",
	"log.dir.failure.timeout.ms",
	"log.flush.offset.checkpoint.interval.ms",
	"log.flush.scheduler.interval.ms",
	"log.flush.start.offset.checkpoint.interval.ms",
	"log.local.retention.bytes",
	"log.local.retention.ms",
	"log.message.timestamp.after.max.ms",
	"log.message.timestamp.before.max.ms",
	"log.preallocate",
	"log.segment.delete.delay.ms",
	"max.connection.creation.rate",
	"max.incremental.fetch.session.cache.slots",
	"metadata.log.dir",
	"metadata.log.max.record.bytes.between.snapshots",
	"metadata.log.max.snapshot.interval.ms",
	"metadata.log.segment.bytes",
	"metadata.log.segment.ms",
	"metadata.max.idle.interval.ms",
	"metadata.max.retention.bytes",
	"metadata.max.retention.ms",
	"metric.reporters",
	"metrics.num.samples",
	"metrics.recording.level",
	"metrics.sample.window.ms",
	"num.io.threads",
	"num.network.threads",
	"num.recovery.threads.per.data.dir",
	"num.replica.alter.log.dirs.threads",
	"offset.metadata.max.bytes",
	"offsets.load.buffer.size",
	"offsets.retention.check.interval.ms",
	"offsets.retention.minutes",
	"offsets.topic.compression.codec",
	"offsets.topic.segment.bytes",
	"principal.builder.class",
	"producer.purgatory.purge.interval.requests",
	"queued.max.requests",
	"replica.selector.class",
	"replica.socket.receive.buffer.bytes",
	"replica.socket.timeout.ms",
	"replication.quota.window.num",
	"replication.quota.window.size.seconds",
	"reserved.broker.max.id",
	"security.providers",
	"socket.connection.setup.timeout.max.ms",
	"socket.connection.setup.timeout.ms",
	"socket.listen.backlog.size",
	"socket.receive.buffer.bytes",
	"socket.send.buffer.bytes",
	"super.users",
	"telemetry.max.bytes",
	"unstable.api.versions.enable",
	"unstable.feature.versions.enable",
}

// kafkaIgnoredPrefixes are families of Kafka keys with no effect in Sluice.
var kafkaIgnoredPrefixes = []string{
	"client.quota.", "delegation.token.", "group.share.", "kafka.metrics.", "listener.name.",
	"log.cleaner.", "metrics.", "quota.", "remote.log.", "replica.", "sasl.", "share.coordinator.",
	"ssl.", "transaction.", "transactional.id.",
}

// isKafkaIgnored reports whether key is a Kafka broker key with no effect in Sluice (a key
// the registry knows is never asked: listener.name.plaintext.max.connections is known).
func isKafkaIgnored(key string) bool {
	if _, ok := slices.BinarySearch(kafkaIgnored, key); ok {
		return true
	}
	for _, p := range kafkaIgnoredPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}
