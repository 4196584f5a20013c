package broker

import "github.com/sluicemq/sluice/replication"

// applyReady acts on what a partition's replication state machine asks for: publish a new high
// watermark and wake the consumer fetches parked on it, answer released acks=all produce waits,
// send an ISR proposal to the controller, write the leader-epoch checkpoint, and carry out a
// truncation (followers: handed to the fetcher, which reports it back with rep.Truncated).
// Called with p.repMu held; it must not block (slow work goes to goroutines).
//
// Contract stub (issue #23): stream D1 writes it.
func (b *Broker) applyReady(p *partition, rd replication.Ready) {}
