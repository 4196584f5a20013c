package reassign

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkGenerate: a cluster of 6 brokers grown to 9, topics of RF 3, swept over the
// partition count: the plan moves a third of the replicas to the new brokers.
func BenchmarkGenerate(b *testing.B) {
	for _, partitions := range []int{100, 1000, 3000} {
		b.Run(fmt.Sprint(partitions), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			var p Plan
			for i := range partitions {
				perm := rng.Perm(6)
				p.Partitions = append(p.Partitions, PartitionPlan{Topic: fmt.Sprintf("t%d", i%10), Partition: int32(i / 10),
					Replicas: []int32{int32(perm[0]), int32(perm[1]), int32(perm[2])}})
			}
			brokers := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8}
			for b.Loop() {
				if _, err := Generate(p, brokers, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
