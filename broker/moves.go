package broker

// Moving replicas and leaders (issue #27): the handlers of CreatePartitions, ElectLeaders,
// AlterPartitionReassignments and ListPartitionReassignments. The controller decides all of
// them (cluster/reassign.go, electleaders.go, createpartitions.go); a broker forwards the
// request to it and answers from the result. A move then goes on through the metadata: the
// reconciler opens the adding replicas, which catch up by fetching from the leader (throttled
// by throttle.go), the leader adds them to the ISR, the controller completes the move in the
// same change, and the reconciler of each removed replica deletes its data.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
)

func (b *Broker) handleCreatePartitions(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.CreatePartitionsRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	return b.async(c, h, func() wire.Encoder {
		resp := &wire.CreatePartitionsResponse{}
		for _, t := range req.Topics {
			var assignment [][]int32
			if t.Assignments != nil {
				assignment = make([][]int32, len(t.Assignments))
				for i, a := range t.Assignments {
					assignment[i] = a.BrokerIDs
				}
			}
			err := b.createPartitions(t.Topic, t.Count, assignment, req.ValidateOnly, requestTimeout(req.TimeoutMs))
			res := wire.CreatePartitionsResult{Topic: t.Topic, ErrorCode: errorCode(err)}
			if err != nil {
				msg := err.Error()
				res.ErrorMessage = &msg
			}
			resp.Results = append(resp.Results, res)
		}
		return resp
	})
}

// createPartitions grows topic to count partitions and waits, within timeout, for the new ones
// this broker hosts to open. validateOnly checks what this broker can (the count, the topic)
// and changes nothing.
func (b *Broker) createPartitions(topic string, count int32, assignment [][]int32, validateOnly bool, timeout time.Duration) error {
	t, ok := b.ctrl.Metadata().Topic(topic)
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", cluster.ErrUnknownTopic, topic)
	case t.Internal || cluster.IsInternalTopicName(topic):
		// __consumer_offsets: a group's coordinator is its partition by the count.
		return fmt.Errorf("%w: %q is internal: its partition count is fixed", cluster.ErrInvalidTopic, topic)
	case count <= int32(len(t.Partitions)):
		return fmt.Errorf("%w: %s has %d partitions; the new count %d must be more", cluster.ErrInvalidPartitions, topic, len(t.Partitions), count)
	case validateOnly:
		return nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	grown, err := b.ctrl.CreatePartitions(ctx, topic, count, assignment)
	if err != nil {
		return err
	}
	return b.awaitHosted(ctx, grown)
}

func (b *Broker) handleElectLeaders(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.ElectLeadersRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	return b.async(c, h, func() wire.Encoder {
		resp := &wire.ElectLeadersResponse{}
		typ := cluster.ElectionType(req.ElectionType)
		if typ != cluster.ElectionPreferred && typ != cluster.ElectionUnclean {
			resp.ErrorCode = wire.ErrInvalidRequest
			return resp
		}
		var parts []cluster.PartitionRef
		if req.Topics != nil {
			parts = []cluster.PartitionRef{}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					parts = append(parts, cluster.PartitionRef{Topic: t.Topic, Partition: p})
				}
			}
		}
		ctx, cancel := context.WithTimeout(b.ctx, requestTimeout(req.TimeoutMs))
		defer cancel()
		results, err := b.ctrl.ElectLeaders(ctx, typ, parts)
		if err != nil {
			resp.ErrorCode = errorCode(err)
			return resp
		}
		for _, r := range results {
			if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != r.Topic {
				resp.Topics = append(resp.Topics, wire.ElectLeadersResult{Topic: r.Topic})
			}
			t := &resp.Topics[len(resp.Topics)-1]
			pr := wire.ElectLeadersPartitionResult{Partition: r.Partition, ErrorCode: errorCode(r.Err)}
			if r.Err != nil {
				msg := r.Err.Error()
				pr.ErrorMessage = &msg
			}
			t.Partitions = append(t.Partitions, pr)
		}
		return resp
	})
}

func (b *Broker) handleAlterPartitionReassignments(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.AlterPartitionReassignmentsRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	return b.async(c, h, func() wire.Encoder {
		var rs []cluster.Reassignment
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				rs = append(rs, cluster.Reassignment{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas})
			}
		}
		// The controller refuses a request with any problem as a whole, naming them all; asked
		// here first (from this broker's metadata), each partition's answer names its own.
		if problems := b.ctrl.Metadata().ReassignmentProblems(rs); len(problems) > 0 {
			return refusedReassignments(&req, problems)
		}
		ctx, cancel := context.WithTimeout(b.ctx, requestTimeout(req.TimeoutMs))
		defer cancel()
		return reassignmentsResponse(&req, b.ctrl.AlterPartitionReassignments(ctx, rs))
	})
}

// reassignmentsResponse answers an AlterPartitionReassignments the controller took (err nil)
// or refused: then every partition carries the refusal's code.
func reassignmentsResponse(req *wire.AlterPartitionReassignmentsRequest, err error) *wire.AlterPartitionReassignmentsResponse {
	resp := &wire.AlterPartitionReassignmentsResponse{ErrorCode: errorCode(err)}
	if err != nil {
		msg := err.Error()
		resp.ErrorMessage = &msg
	}
	for _, t := range req.Topics {
		rt := wire.ReassignTopicResult{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, wire.ReassignPartitionResult{Partition: p.Partition, ErrorCode: resp.ErrorCode})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// refusedReassignments answers a request refused for problems: the request's code and every
// problem in its message, each partition with its own problems (NONE for those without).
func refusedReassignments(req *wire.AlterPartitionReassignmentsRequest, problems []cluster.ReassignmentProblem) *wire.AlterPartitionReassignmentsResponse {
	code := wire.ErrInvalidReplicaAssignment
	byRef := map[cluster.PartitionRef][]cluster.ReassignmentProblem{}
	texts := make([]string, len(problems))
	for i, pr := range problems {
		byRef[pr.PartitionRef] = append(byRef[pr.PartitionRef], pr)
		texts[i] = pr.String()
	}
	notMoving := func(prs []cluster.ReassignmentProblem) bool {
		for _, pr := range prs {
			if !pr.NotMoving {
				return false
			}
		}
		return len(prs) > 0
	}
	if notMoving(problems) {
		code = wire.ErrNoReassignmentInProgress
	}
	msg := fmt.Sprintf("nothing started: %s", strings.Join(texts, "; "))
	resp := &wire.AlterPartitionReassignmentsResponse{ErrorCode: code, ErrorMessage: &msg}
	for _, t := range req.Topics {
		rt := wire.ReassignTopicResult{Topic: t.Topic}
		for _, p := range t.Partitions {
			pr := wire.ReassignPartitionResult{Partition: p.Partition}
			if own := byRef[cluster.PartitionRef{Topic: t.Topic, Partition: p.Partition}]; len(own) > 0 {
				pr.ErrorCode = wire.ErrInvalidReplicaAssignment
				if notMoving(own) {
					pr.ErrorCode = wire.ErrNoReassignmentInProgress
				}
				var parts []string
				for _, o := range own {
					parts = append(parts, o.Problem)
				}
				m := strings.Join(parts, "; ")
				pr.ErrorMessage = &m
			}
			rt.Partitions = append(rt.Partitions, pr)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (b *Broker) handleListPartitionReassignments(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	var req wire.ListPartitionReassignmentsRequest
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	return respond(c, h, listReassignments(b.ctrl.Metadata(), req.Topics))
}

// listReassignments lists md's moves in progress among topics (nil: all), sorted.
func listReassignments(md *cluster.Metadata, topics []wire.ListReassignTopic) *wire.ListPartitionReassignmentsResponse {
	resp := &wire.ListPartitionReassignmentsResponse{}
	want := map[string][]int32{}
	for _, t := range topics {
		want[t.Topic] = append(want[t.Topic], t.Partitions...)
	}
	for _, tm := range md.Topics() { // sorted by name
		ps, named := want[tm.Name]
		if topics != nil && !named {
			continue
		}
		var out []wire.ListedReassignPartition
		for _, pm := range tm.Partitions {
			if !pm.Reassigning() || (topics != nil && !slices.Contains(ps, pm.Partition)) {
				continue
			}
			out = append(out, wire.ListedReassignPartition{Partition: pm.Partition, Replicas: slices.Clone(pm.Replicas),
				AddingReplicas: slices.Clone(pm.AddingReplicas), RemovingReplicas: slices.Clone(pm.RemovingReplicas)})
		}
		if len(out) > 0 {
			resp.Topics = append(resp.Topics, wire.ListedReassignTopic{Topic: tm.Name, Partitions: out})
		}
	}
	return resp
}
