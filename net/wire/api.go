package wire

import (
	"strconv"
)

// APIKey identifies a request type in the request header. The numbers are
// Kafka's, so a packet capture reads the same in Kafka tooling, and keys
// Sluice will need later are reserved now so nothing else takes them.
// Sluice's own apis (shared.go) start at 9000, far above Kafka's.
type APIKey int16

// Api keys with request types in this package.
const (
	Produce      APIKey = 0
	Fetch        APIKey = 1 // consumers (ReplicaID -1) and, later, followers (ReplicaID = broker id)
	ListOffsets  APIKey = 2
	Metadata     APIKey = 3
	OffsetCommit APIKey = 8
	OffsetFetch  APIKey = 9
	ListGroups   APIKey = 16
	// The classic consumer group protocol (the group coordinator, broker/groups.go).
	FindCoordinator APIKey = 10
	JoinGroup       APIKey = 11
	Heartbeat       APIKey = 12
	LeaveGroup      APIKey = 13
	SyncGroup       APIKey = 14
	DescribeGroups  APIKey = 15
	OffsetDelete    APIKey = 47
	APIVersions     APIKey = 18
	CreateTopics    APIKey = 19
	DeleteTopics    APIKey = 20
	// InitProducerID gives an idempotent producer its producer id and epoch.
	InitProducerID APIKey = 22
	// OffsetForLeaderEpoch (KIP-101): a follower asks where an epoch ends before it fetches.
	OffsetForLeaderEpoch APIKey = 23
	DescribeConfigs      APIKey = 32
	AlterConfigs         APIKey = 33
	DeleteGroups         APIKey = 42
	DescribeCluster      APIKey = 60
	// Moving replicas and leaders (the controller's reassignments, elections, new partitions).
	CreatePartitions            APIKey = 37
	ElectLeaders                APIKey = 43
	AlterPartitionReassignments APIKey = 45
	ListPartitionReassignments  APIKey = 46
)

// Reserved api keys: named so logs and the docs can say what a peer asked
// for, but with no types yet, so NewRequest rejects them with ErrUnknownAPI.
//
// Replica fetch needs no key of its own: as in Kafka, a follower sends Fetch
// with ReplicaID set to its broker id.
const (
	IncrementalAlterConfigs APIKey = 44
	AlterPartition          APIKey = 56
	BrokerRegistration      APIKey = 62
	BrokerHeartbeat         APIKey = 63
)

// apiInfo is one row of the api table. For a reserved key, supported is
// false and the versions are meaningless.
type apiInfo struct {
	key       APIKey
	name      string
	supported bool
	min, max  int16
}

// apiTable lists every known key in key order. Raising max for a key is how
// a new version ships: ApiVersions then advertises it, and the request and
// response types gain a Version field whose zero value is version 0.
var apiTable = []apiInfo{
	{Produce, "Produce", true, 0, 1},
	{Fetch, "Fetch", true, 0, 2},
	{ListOffsets, "ListOffsets", true, 0, 0},
	{Metadata, "Metadata", true, 0, 1},
	{OffsetCommit, "OffsetCommit", true, 0, 1},
	{OffsetFetch, "OffsetFetch", true, 0, 0},
	{FindCoordinator, "FindCoordinator", true, 0, 0},
	{JoinGroup, "JoinGroup", true, 0, 0},
	{Heartbeat, "Heartbeat", true, 0, 0},
	{LeaveGroup, "LeaveGroup", true, 0, 0},
	{SyncGroup, "SyncGroup", true, 0, 0},
	{DescribeGroups, "DescribeGroups", true, 0, 0},
	{ListGroups, "ListGroups", true, 0, 1},
	{APIVersions, "ApiVersions", true, 0, 0},
	{CreateTopics, "CreateTopics", true, 0, 0},
	{DeleteTopics, "DeleteTopics", true, 0, 0},
	{InitProducerID, "InitProducerId", true, 0, 0},
	{OffsetForLeaderEpoch, "OffsetForLeaderEpoch", true, 0, 0},
	{DescribeConfigs, "DescribeConfigs", true, 0, 0},
	{AlterConfigs, "AlterConfigs", true, 0, 0},
	{CreatePartitions, "CreatePartitions", true, 0, 0},
	{DeleteGroups, "DeleteGroups", true, 0, 0},
	{ElectLeaders, "ElectLeaders", true, 0, 0},
	{IncrementalAlterConfigs, "IncrementalAlterConfigs", false, 0, 0},
	{AlterPartitionReassignments, "AlterPartitionReassignments", true, 0, 0},
	{ListPartitionReassignments, "ListPartitionReassignments", true, 0, 0},
	{OffsetDelete, "OffsetDelete", true, 0, 0},
	{AlterPartition, "AlterPartition", false, 0, 0},
	{DescribeCluster, "DescribeCluster", true, 0, 0},
	{BrokerRegistration, "BrokerRegistration", false, 0, 0},
	{BrokerHeartbeat, "BrokerHeartbeat", false, 0, 0},
	{AttachMemory, "AttachMemory", true, 0, 0},
	{ProduceShared, "ProduceShared", true, 0, 1},
	{FetchShared, "FetchShared", true, 0, 1},
	{DescribeReplicas, "DescribeReplicas", true, 0, 1},
}

func lookupAPI(k APIKey) (apiInfo, bool) {
	for _, a := range apiTable {
		if a.key == k {
			return a, true
		}
	}
	return apiInfo{}, false
}

// String returns Kafka's name for the key (e.g. "ApiVersions"), or
// "APIKey(n)" for an unknown key.
func (k APIKey) String() string {
	if a, ok := lookupAPI(k); ok {
		return a.name
	}
	return "APIKey(" + strconv.Itoa(int(k)) + ")"
}

// Versions returns the versions of k this package implements; ok is false
// for unknown and reserved keys.
func (k APIKey) Versions() (minVersion, maxVersion int16, ok bool) {
	a, found := lookupAPI(k)
	if !found || !a.supported {
		return 0, 0, false
	}
	return a.min, a.max, true
}

// CheckVersion returns ErrUnknownAPI if k has no types here, and
// ErrUnsupportedVersion (the protocol error code, so a server can answer
// with it) if v is outside k's range.
func CheckVersion(k APIKey, v int16) error {
	lo, hi, ok := k.Versions()
	if !ok {
		return ErrUnknownAPI
	}
	if v < lo || v > hi {
		return ErrUnsupportedVersion
	}
	return nil
}

// SupportedAPIs returns the version range of every implemented key, in key
// order: the body of a broker's ApiVersions answer.
func SupportedAPIs() []APIVersionRange {
	var out []APIVersionRange
	for _, a := range apiTable {
		if a.supported {
			out = append(out, APIVersionRange{APIKey: a.key, MinVersion: a.min, MaxVersion: a.max})
		}
	}
	return out
}

// Versioned is a request of an api with several versions: APIVersion is the version it is
// encoded in, which goes in its request header. A request that does not implement it is
// version 0.
type Versioned interface {
	APIVersion() int16
}

// VersionOf is the version req is encoded in (Versioned), 0 for a request of one version.
func VersionOf(req Request) int16 {
	if v, ok := req.(Versioned); ok {
		return v.APIVersion()
	}
	return 0
}

// Encoder is anything that appends its encoding to a buffer.
type Encoder interface {
	AppendTo(dst []byte) []byte
}

// Message is a request or response body: AppendTo appends its encoding;
// ReadFrom decodes b, which must hold exactly one body, overwriting every
// field. ReadFrom reuses the receiver's slices and aliases byte fields
// (records) into b, so a decoded value is valid only while b is, and a value
// can be reused to decode the next message without allocating.
type Message interface {
	Encoder
	ReadFrom(b []byte) error
}

// Request is the body of a request of one api key.
type Request interface {
	Message
	Key() APIKey
}

// Response is the body of a response to a request of one api key.
type Response interface {
	Message
	Key() APIKey
}

// NewRequest returns an empty request of the given key and version, for a
// server to decode a frame into. It fails with CheckVersion's errors.
func NewRequest(k APIKey, version int16) (Request, error) {
	if err := CheckVersion(k, version); err != nil {
		return nil, err
	}
	switch k {
	case Produce:
		return &ProduceRequest{Version: version}, nil
	case Fetch:
		return &FetchRequest{Version: version}, nil
	case ListOffsets:
		return new(ListOffsetsRequest), nil
	case Metadata:
		return &MetadataRequest{Version: version}, nil
	case OffsetCommit:
		return &OffsetCommitRequest{Version: version}, nil
	case OffsetFetch:
		return new(OffsetFetchRequest), nil
	case ListGroups:
		return &ListGroupsRequest{Version: version}, nil
	case FindCoordinator:
		return new(FindCoordinatorRequest), nil
	case JoinGroup:
		return new(JoinGroupRequest), nil
	case SyncGroup:
		return new(SyncGroupRequest), nil
	case Heartbeat:
		return new(HeartbeatRequest), nil
	case LeaveGroup:
		return new(LeaveGroupRequest), nil
	case DescribeGroups:
		return new(DescribeGroupsRequest), nil
	case OffsetDelete:
		return new(OffsetDeleteRequest), nil
	case DeleteGroups:
		return new(DeleteGroupsRequest), nil
	case CreatePartitions:
		return new(CreatePartitionsRequest), nil
	case ElectLeaders:
		return new(ElectLeadersRequest), nil
	case AlterPartitionReassignments:
		return new(AlterPartitionReassignmentsRequest), nil
	case ListPartitionReassignments:
		return new(ListPartitionReassignmentsRequest), nil
	case InitProducerID:
		return new(InitProducerIDRequest), nil
	case DescribeCluster:
		return new(DescribeClusterRequest), nil
	case OffsetForLeaderEpoch:
		return &OffsetForLeaderEpochRequest{Version: version}, nil
	case APIVersions:
		return new(APIVersionsRequest), nil
	case CreateTopics:
		return new(CreateTopicsRequest), nil
	case DeleteTopics:
		return new(DeleteTopicsRequest), nil
	case DescribeConfigs:
		return new(DescribeConfigsRequest), nil
	case AlterConfigs:
		return new(AlterConfigsRequest), nil
	case AttachMemory:
		return new(AttachMemoryRequest), nil
	case ProduceShared:
		return &ProduceSharedRequest{Version: version}, nil
	case FetchShared:
		return &FetchSharedRequest{FetchRequest: FetchRequest{Version: version}}, nil
	case DescribeReplicas:
		return &DescribeReplicasRequest{Version: version}, nil
	}
	return nil, ErrUnknownAPI // unreachable while apiTable and this switch agree; a test checks they do
}

// NewResponse returns an empty response of the given key and version, for a
// client to decode a frame into.
func NewResponse(k APIKey, version int16) (Response, error) {
	if err := CheckVersion(k, version); err != nil {
		return nil, err
	}
	switch k {
	case Produce:
		return &ProduceResponse{Version: version}, nil
	case Fetch:
		return &FetchResponse{Version: version}, nil
	case ListOffsets:
		return new(ListOffsetsResponse), nil
	case Metadata:
		return &MetadataResponse{Version: version}, nil
	case OffsetCommit:
		return new(OffsetCommitResponse), nil
	case OffsetFetch:
		return new(OffsetFetchResponse), nil
	case ListGroups:
		return &ListGroupsResponse{Version: version}, nil
	case FindCoordinator:
		return new(FindCoordinatorResponse), nil
	case JoinGroup:
		return new(JoinGroupResponse), nil
	case SyncGroup:
		return new(SyncGroupResponse), nil
	case Heartbeat:
		return new(HeartbeatResponse), nil
	case LeaveGroup:
		return new(LeaveGroupResponse), nil
	case DescribeGroups:
		return new(DescribeGroupsResponse), nil
	case OffsetDelete:
		return new(OffsetDeleteResponse), nil
	case DeleteGroups:
		return new(DeleteGroupsResponse), nil
	case CreatePartitions:
		return new(CreatePartitionsResponse), nil
	case ElectLeaders:
		return new(ElectLeadersResponse), nil
	case AlterPartitionReassignments:
		return new(AlterPartitionReassignmentsResponse), nil
	case ListPartitionReassignments:
		return new(ListPartitionReassignmentsResponse), nil
	case InitProducerID:
		return new(InitProducerIDResponse), nil
	case DescribeCluster:
		return new(DescribeClusterResponse), nil
	case OffsetForLeaderEpoch:
		return &OffsetForLeaderEpochResponse{Version: version}, nil
	case APIVersions:
		return new(APIVersionsResponse), nil
	case CreateTopics:
		return new(CreateTopicsResponse), nil
	case DeleteTopics:
		return new(DeleteTopicsResponse), nil
	case DescribeConfigs:
		return new(DescribeConfigsResponse), nil
	case AlterConfigs:
		return new(AlterConfigsResponse), nil
	case AttachMemory:
		return new(AttachMemoryResponse), nil
	case ProduceShared:
		return &ProduceSharedResponse{ProduceResponse{Version: version}}, nil
	case FetchShared:
		return &FetchSharedResponse{FetchResponse: FetchResponse{Version: version}}, nil
	case DescribeReplicas:
		return &DescribeReplicasResponse{Version: version}, nil
	}
	return nil, ErrUnknownAPI
}
