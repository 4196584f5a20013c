// Package client is Sluice's Go client. This first part is the transport: one address form for
// both transports ("host:port" for TCP, "unix:///path" or a plain path for the unix socket) and
// a connection that pipelines requests, matching responses to callers by correlation id. The
// Producer, Consumer and Admin build on it.
//
// Concurrency: a Conn is safe for concurrent use. Writes are serialised by wmu, so requests go
// out in the order their correlation ids were assigned; one reader goroutine owns the socket's
// read side and hands each response to the caller waiting for it. Close stops the reader and
// fails every outstanding call.
package client
