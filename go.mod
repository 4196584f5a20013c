module github.com/sluicemq/sluice

go 1.26.0

require (
	github.com/edsrzf/mmap-go v1.2.0 // indirect
	github.com/golang/snappy v1.0.0 // indirect
	github.com/hashicorp/go-immutable-radix v1.3.1 // indirect
	github.com/hashicorp/go-metrics v0.5.4 // indirect
	github.com/hashicorp/golang-lru v0.5.0 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.22 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
