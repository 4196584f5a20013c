package broker

// testHooks are the points where a test steps into a request of one broker (Broker.hooks, set
// only by tests: nil in production, where each costs one atomic load and a nil check).
type testHooks struct {
	// fetchBounds runs between a fetch's reads of a partition's log start and high watermark.
	fetchBounds func()
	// sharedCopied runs between a ProduceShared request's copies out of its region and the
	// second reading of their guards (shared.go).
	sharedCopied func()
}
