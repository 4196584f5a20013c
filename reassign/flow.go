package reassign

import "container/heap"

// flowGraph is a min-cost flow network solved primal-dual: a phase finds the least reduced
// cost from the source to every node (Dijkstra over Johnson potentials, which needs every
// edge's cost ≥ 0 at the start, as Generate's networks have), raises the potentials by it, and
// then sends as much flow as the edges of reduced cost 0 carry (Dinic's blocking flows). Each
// phase's paths cost strictly more than the last one's, and Generate's costs take few values,
// so there are few phases, each O(E log V + Dinic). Deterministic: the same edges added in the
// same order give the same flow.
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
			if u == t {
				break // nodes not yet settled are at least this far: see below
			}
			for _, e := range g.adj[u] {
				if e.cap == 0 {
					continue
				}
				if nd := dist[u] + e.cost + pot[u] - pot[e.to]; nd < dist[e.to] {
					dist[e.to] = nd
					heap.Push(pq, heapItem{node: e.to, dist: nd})
				}
			}
		}
		if dist[t] == inf {
			break
		}
		// Raising every potential by min(dist, dist[t]) keeps every residual edge's reduced
		// cost ≥ 0 and makes those of the shortest paths 0.
		for v := range pot {
			pot[v] += min(dist[v], dist[t])
		}
		sent += g.blockingFlows(s, t, want-sent, pot)
	}
	return sent
}

// blockingFlows sends up to limit units over the edges of reduced cost 0 (Dinic: levels by
// breadth-first search, then depth-first pushes with a current edge per node), until no such
// path is left.
func (g *flowGraph) blockingFlows(s, t, limit int, pot []int64) int {
	n := len(g.adj)
	level := make([]int, n)
	next := make([]int, n)
	admissible := func(u int, e flowEdge) bool { return e.cap > 0 && e.cost+pot[u]-pot[e.to] == 0 }
	var push func(u, f int) int
	push = func(u, f int) int {
		if u == t {
			return f
		}
		for ; next[u] < len(g.adj[u]); next[u]++ {
			e := &g.adj[u][next[u]]
			if !admissible(u, *e) || level[e.to] != level[u]+1 {
				continue
			}
			if d := push(e.to, min(f, e.cap)); d > 0 {
				e.cap -= d
				g.adj[e.to][e.rev].cap += d
				return d
			}
		}
		return 0
	}
	sent := 0
	queue := make([]int, 0, n)
	for sent < limit {
		for i := range level {
			level[i] = -1
		}
		level[s] = 0
		queue = append(queue[:0], s)
		for qi := 0; qi < len(queue); qi++ {
			u := queue[qi]
			for _, e := range g.adj[u] {
				if level[e.to] < 0 && admissible(u, e) {
					level[e.to] = level[u] + 1
					queue = append(queue, e.to)
				}
			}
		}
		if level[t] < 0 {
			break
		}
		clear(next)
		for sent < limit {
			d := push(s, limit-sent)
			if d == 0 {
				break
			}
			sent += d
		}
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
