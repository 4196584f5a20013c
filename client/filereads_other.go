//go:build !unix

package client

import "os"

func unlinked(*os.File) bool { return false }
