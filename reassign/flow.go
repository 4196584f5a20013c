package reassign

import "container/heap"

// flowGraph is a min-cost flow network solved by successive shortest paths: Dijkstra over
// reduced costs (Johnson potentials), which needs every edge's cost ≥ 0 at the start, as
// Generate's networks have. Each augmentation carries at least one unit, so a flow of F costs
// F shortest-path searches, O(F · E log V). Deterministic: the same edges added in the same
// order give the same flow.
type flowGraph struct {
	adj [][]flowEdge
}

type flowEdge struct {
	to, rev int // rev: the index of the reverse edge in adj[to]
	cap     int
	cost    int64
}

// edgeRef names an edge for reading its flow after the solve.
type edgeRef struct{ from, i int }

func newFlowGraph(nodes int) *flowGraph { return &flowGraph{adj: make([][]flowEdge, nodes)} }

func (g *flowGraph) add(from, to, cap int, cost int64) edgeRef {
	g.adj[from] = append(g.adj[from], flowEdge{to: to, rev: len(g.adj[to]), cap: cap, cost: cost})
	g.adj[to] = append(g.adj[to], flowEdge{to: from, rev: len(g.adj[from]) - 1, cap: 0, cost: -cost})
	return edgeRef{from, len(g.adj[from]) - 1}
}

// flow is the flow on e: the capacity its reverse edge has gained.
func (g *flowGraph) flow(e edgeRef) int {
	fe := g.adj[e.from][e.i]
	return g.adj[fe.to][fe.rev].cap
}

// solve sends up to want units from s to t at the least cost and returns how many it sent.
func (g *flowGraph) solve(s, t, want int) int {
	n := len(g.adj)
	pot := make([]int64, n)
	dist := make([]int64, n)
	prevNode := make([]int, n)
	prevEdge := make([]int, n)
	const inf = int64(1) << 62
	sent := 0
	for sent < want {
		for i := range dist {
			dist[i] = inf
		}
		dist[s] = 0
		pq := &nodeHeap{{node: s}}
		for pq.Len() > 0 {
			it := heap.Pop(pq).(heapItem)
			if it.dist > dist[it.node] {
				continue
			}
			u := it.node
			for i, e := range g.adj[u] {
				if e.cap == 0 {
					continue
				}
				nd := dist[u] + e.cost + pot[u] - pot[e.to]
				if nd < dist[e.to] {
					dist[e.to] = nd
					prevNode[e.to], prevEdge[e.to] = u, i
					heap.Push(pq, heapItem{node: e.to, dist: nd})
				}
			}
		}
		if dist[t] == inf {
			break
		}
		for v := range pot {
			if dist[v] < inf {
				pot[v] += dist[v]
			}
		}
		push := want - sent
		for v := t; v != s; v = prevNode[v] {
			push = min(push, g.adj[prevNode[v]][prevEdge[v]].cap)
		}
		for v := t; v != s; v = prevNode[v] {
			e := &g.adj[prevNode[v]][prevEdge[v]]
			e.cap -= push
			g.adj[v][e.rev].cap += push
		}
		sent += push
	}
	return sent
}

type heapItem struct {
	node int
	dist int64
}

// nodeHeap orders by distance, then node: ties broken the same way every run.
type nodeHeap []heapItem

func (h nodeHeap) Len() int { return len(h) }
func (h nodeHeap) Less(i, j int) bool {
	if h[i].dist != h[j].dist {
		return h[i].dist < h[j].dist
	}
	return h[i].node < h[j].node
}
func (h nodeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *nodeHeap) Push(x any)   { *h = append(*h, x.(heapItem)) }
func (h *nodeHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
