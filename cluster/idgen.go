package cluster

import (
	"crypto/rand"
	"encoding/base64"
)

// newClusterID draws an id in Kafka's form, a random version 4 uuid as URL-safe base64 without
// padding (22 characters): the cluster id, and a broker's incarnation.
func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
