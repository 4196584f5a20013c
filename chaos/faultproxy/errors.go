package faultproxy

import "errors"

// ErrClosed is the error of Front on a closed Proxy.
var ErrClosed = errors.New("faultproxy: closed")
