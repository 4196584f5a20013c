//go:build !unix

package client

import "os"

func unlinked(*os.File) bool { return false }

const spanOpenFlags = 0

func setBlocking(*os.File) error { return nil }
