package wire

import "reflect"

// sample is one message value used by the round-trip, truncation, reuse and
// fuzz-seed tests. Every request and response type has several: a full one,
// and ones that pin null vs empty for each nullable field.
type sample struct {
	name string
	msg  Message
}

func sp(s string) *string { return &s }

// fresh returns a new zero value of m's type.
func fresh(m Message) Message {
	v := reflect.New(reflect.TypeOf(m).Elem()).Interface().(Message)
	setVersion(v, m)
	return v
}

// setVersion gives dst the Version of like, if its type has one: a versioned message decodes
// in the layout it says (as a client sets Version before decoding the response to the request
// it sent in that version).
func setVersion(dst, like Message) {
	if f := reflect.ValueOf(like).Elem().FieldByName("Version"); f.IsValid() {
		reflect.ValueOf(dst).Elem().FieldByName("Version").Set(f)
	}
}

func samples() []sample {
	records := []byte("batch-0 bytes....batch-1 bytes")
	return []sample{
		{"ApiVersionsRequest", &APIVersionsRequest{}},
		{"ApiVersionsResponse", &APIVersionsResponse{APIKeys: SupportedAPIs(), ThrottleMs: 7}},
		{"ApiVersionsResponse/unsupported", &APIVersionsResponse{ErrorCode: ErrUnsupportedVersion, APIKeys: []APIVersionRange{{APIKey: APIVersions}}}},

		{"MetadataRequest/all", &MetadataRequest{Topics: nil, AllowAutoTopicCreation: true}},
		{"MetadataRequest/none", &MetadataRequest{Topics: []string{}}},
		{"MetadataRequest/some", &MetadataRequest{Topics: []string{"orders", ""}}},
		{"MetadataResponse", &MetadataResponse{
			ThrottleMs: 1,
			Brokers: []MetadataBroker{
				{NodeID: 1, Host: "10.0.0.1", Port: 9092, UnixPath: "/var/run/sluice.sock"},
				{NodeID: 2, Host: "10.0.0.2", Port: 9092},
			},
			ClusterID:    sp("c-1"),
			ControllerID: 1,
			Topics: []MetadataTopic{
				{Topic: "orders", Partitions: []MetadataPartition{
					{Partition: 0, Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1}},
					{Partition: 1, ErrorCode: ErrLeaderNotAvailable, Leader: -1, LeaderEpoch: -1},
				}},
				{ErrorCode: ErrUnknownTopicOrPartition, Topic: "nope"},
				{Topic: "__consumer_offsets", IsInternal: true},
			},
		}},
		{"MetadataResponse/nullCluster", &MetadataResponse{ClusterID: nil, ControllerID: -1}},
		{"MetadataResponse/emptyCluster", &MetadataResponse{ClusterID: sp("")}},

		{"CreateTopicsRequest", &CreateTopicsRequest{
			Topics: []CreateTopicsRequestTopic{
				{Topic: "a", NumPartitions: 3, ReplicationFactor: 2, Configs: []ConfigEntry{
					{Name: "retention.ms", Value: sp("1000")},
					{Name: "cleanup.policy", Value: nil},
					{Name: "write.caching", Value: sp("")},
				}},
				{Topic: "b", NumPartitions: -1, ReplicationFactor: -1, Assignments: []CreateTopicsAssignment{
					{Partition: 0, Replicas: []int32{1, 2, 3}},
					{Partition: 1, Replicas: []int32{2, 3, 1}},
				}},
			},
			TimeoutMs:    30000,
			ValidateOnly: true,
		}},
		{"CreateTopicsResponse", &CreateTopicsResponse{ThrottleMs: 2, Topics: []TopicResult{
			{Topic: "a"},
			{Topic: "b", ErrorCode: ErrTopicAlreadyExists, ErrorMessage: sp("topic b exists")},
			{Topic: "c", ErrorCode: ErrInvalidConfig, ErrorMessage: sp("")},
		}}},

		{"DeleteTopicsRequest", &DeleteTopicsRequest{Topics: []string{"a", "b"}, TimeoutMs: 5000}},
		{"DeleteTopicsResponse", &DeleteTopicsResponse{Topics: []TopicResult{
			{Topic: "a"}, {Topic: "b", ErrorCode: ErrUnknownTopicOrPartition},
		}}},

		{"DescribeConfigsRequest", &DescribeConfigsRequest{Resources: []DescribeConfigsResource{
			{ResourceType: ResourceTopic, ResourceName: "a", ConfigNames: nil},
			{ResourceType: ResourceTopic, ResourceName: "b", ConfigNames: []string{}},
			{ResourceType: ResourceBroker, ResourceName: "1", ConfigNames: []string{"log.segment.bytes"}},
		}}},
		{"DescribeConfigsResponse", &DescribeConfigsResponse{ThrottleMs: 3, Resources: []DescribeConfigsResult{
			{ResourceType: ResourceTopic, ResourceName: "a", Configs: []DescribeConfigsEntry{
				{Name: "retention.ms", Value: sp("604800000"), Source: ConfigSourceDefault},
				{Name: "min.insync.replicas", Value: sp("2"), Source: ConfigSourceDynamicTopic},
				{Name: "secret", Value: nil, ReadOnly: true, IsSensitive: true, Source: ConfigSourceStaticBroker},
			}},
			{ErrorCode: ErrUnknownTopicOrPartition, ErrorMessage: sp("no topic b"), ResourceType: ResourceTopic, ResourceName: "b"},
		}}},

		{"AlterConfigsRequest", &AlterConfigsRequest{Resources: []AlterConfigsResource{
			{ResourceType: ResourceTopic, ResourceName: "a", Configs: []ConfigEntry{{Name: "retention.ms", Value: sp("1")}, {Name: "x", Value: nil}}},
			{ResourceType: ResourceTopic, ResourceName: "b"},
		}, ValidateOnly: true}},
		{"AlterConfigsResponse", &AlterConfigsResponse{ThrottleMs: 4, Resources: []AlterConfigsResult{
			{ResourceType: ResourceTopic, ResourceName: "a"},
			{ErrorCode: ErrInvalidConfig, ErrorMessage: sp("bad value"), ResourceType: ResourceTopic, ResourceName: "b"},
		}}},

		{"ProduceRequest", &ProduceRequest{Acks: AcksAll, TimeoutMs: 30000, Topics: []ProduceRequestTopic{
			{Topic: "orders", Partitions: []ProduceRequestPartition{
				{Partition: 0, Records: records},
				{Partition: 1, Records: []byte{}},
				{Partition: 2, Records: nil},
			}},
			{Topic: "clicks", Partitions: []ProduceRequestPartition{{Partition: 7, Records: []byte{1, 2, 3}}}},
		}}},
		{"ProduceRequest/transactional", &ProduceRequest{TransactionalID: sp("tx"), Acks: AcksLeader}},
		{"ProduceRequest/emptyTxID", &ProduceRequest{TransactionalID: sp(""), Acks: AcksNone}},
		{"ProduceResponse", &ProduceResponse{ThrottleMs: 5, Topics: []ProduceResponseTopic{
			{Topic: "orders", Partitions: []ProduceResponsePartition{
				{Partition: 0, BaseOffset: 100, LogAppendTimeMs: -1, LogStartOffset: 0, CurrentLeader: NoLeaderHint},
				{Partition: 1, ErrorCode: ErrCorruptMessage, BaseOffset: -1, LogAppendTimeMs: -1, LogStartOffset: -1, ErrorMessage: sp("crc mismatch in batch 0"), CurrentLeader: NoLeaderHint},
			}},
		}}},
		{"ProduceResponse/v1", &ProduceResponse{Version: 1, ThrottleMs: 5, Topics: []ProduceResponseTopic{
			{Topic: "orders", Partitions: []ProduceResponsePartition{
				{Partition: 0, BaseOffset: 100, LogAppendTimeMs: -1, LogStartOffset: 0, CurrentLeader: NoLeaderHint},
				{Partition: 1, ErrorCode: ErrNotLeaderOrFollower, BaseOffset: -1, LogAppendTimeMs: -1, LogStartOffset: -1, CurrentLeader: LeaderHint{LeaderID: 2, LeaderEpoch: 7}},
			}},
		}, NodeEndpoints: []MetadataBroker{{NodeID: 2, Host: "127.0.0.1", Port: 9192, UnixPath: "/run/b2.sock"}}}},
		{"ProduceResponse/v1noEndpoints", &ProduceResponse{Version: 1, Topics: []ProduceResponseTopic{
			{Topic: "t", Partitions: []ProduceResponsePartition{{Partition: 0, ErrorCode: ErrNotLeaderOrFollower, CurrentLeader: NoLeaderHint}}},
		}}},

		{"AttachMemoryRequest", &AttachMemoryRequest{Bytes: 8 << 20}},
		{"AttachMemoryResponse", &AttachMemoryResponse{}},
		{"AttachMemoryResponse/error", &AttachMemoryResponse{ErrorCode: ErrInvalidRequest, ErrorMessage: sp("not a sealed memfd")}},
		{"ProduceSharedRequest", &ProduceSharedRequest{Parts: []SharedPart{
			{Inline: []byte("prefix"), Offset: 1 << 20, Length: 65536, GuardOffset: 1<<20 - 64, Guard: 7},
			{Inline: []byte{}, Offset: 0, Length: 100, GuardOffset: -1},
			{Inline: []byte("suffix"), GuardOffset: -1},
		}}},
		{"ProduceSharedRequest/empty", &ProduceSharedRequest{}},
		{"ProduceSharedResponse", &ProduceSharedResponse{ProduceResponse{ThrottleMs: 1, Topics: []ProduceResponseTopic{
			{Topic: "logs", Partitions: []ProduceResponsePartition{{Partition: 2, BaseOffset: 7, LogAppendTimeMs: -1, LogStartOffset: 0, CurrentLeader: NoLeaderHint}}},
		}}}},

		// v0 and v1 requests decode as a sessionless full fetch (SessionEpoch FinalSessionEpoch)
		// whose partitions' DurableOffset is -1.
		{"FetchRequest", &FetchRequest{ReplicaID: ConsumerReplicaID, MaxWaitMs: 500, MinBytes: 1, MaxBytes: 50 << 20, IsolationLevel: ReadCommitted,
			SessionEpoch: FinalSessionEpoch,
			Topics: []FetchRequestTopic{{Topic: "orders", Partitions: []FetchRequestPartition{
				{Partition: 0, CurrentLeaderEpoch: 3, FetchOffset: 42, LogStartOffset: -1, PartitionMaxBytes: 1 << 20, DurableOffset: -1},
				{Partition: 1, CurrentLeaderEpoch: -1, FetchOffset: 0, LogStartOffset: -1, PartitionMaxBytes: 1 << 20, DurableOffset: -1},
			}}}}},
		{"FetchRequest/follower", &FetchRequest{ReplicaID: 2, SessionEpoch: FinalSessionEpoch, Topics: []FetchRequestTopic{{Topic: "t"}}}},
		{"FetchRequest/v2", sampleFetchRequestV2()},
		{"FetchRequest/v2open", &FetchRequest{Version: 2, ReplicaID: 2, MaxWaitMs: 500, MinBytes: 1, MaxBytes: 10 << 20, SessionID: 0, SessionEpoch: InitialSessionEpoch,
			Topics: []FetchRequestTopic{{Topic: "t", Partitions: []FetchRequestPartition{
				{Partition: 0, CurrentLeaderEpoch: 1, FetchOffset: 0, LogStartOffset: 0, PartitionMaxBytes: 1 << 20, DurableOffset: 0},
			}}}}},
		{"FetchResponse", sampleFetchResponse()},
		{"FetchResponse/error", &FetchResponse{ErrorCode: ErrUnknownServerError}},
		{"FetchResponse/v1", sampleFetchResponseV1()},
		{"FetchResponse/v2", sampleFetchResponseV2()},
		{"FetchResponse/v2sessionError", &FetchResponse{Version: 2, ErrorCode: ErrUnknownServerError, SessionID: 0}},
		{"FetchSharedRequest", &FetchSharedRequest{FetchRequest: FetchRequest{ReplicaID: ConsumerReplicaID, MaxWaitMs: 500, MinBytes: 1, MaxBytes: 50 << 20,
			SessionEpoch: FinalSessionEpoch,
			Topics: []FetchRequestTopic{{Topic: "orders", Partitions: []FetchRequestPartition{
				{Partition: 0, CurrentLeaderEpoch: -1, FetchOffset: 42, LogStartOffset: -1, PartitionMaxBytes: 1 << 20, DurableOffset: -1},
			}}}}, SpanMaxBytes: 256 << 20}},
		{"FetchSharedResponse", &FetchSharedResponse{FetchResponse: *sampleFetchResponse(), Spans: []FileSpan{
			{Index: 1, Path: "/var/lib/sluice/orders-0/00000000000000000000.log", Dev: 2049, Ino: 1 << 40, Pos: 4096, Len: 1 << 20},
		}}},
		{"FetchSharedResponse/v1", &FetchSharedResponse{FetchResponse: *sampleFetchResponseV1(), Spans: []FileSpan{
			{Index: 0, Path: "/data/orders-0/00000000000000000000.log", Dev: 2049, Ino: 7, Pos: 0, Len: 4096},
		}}},
		{"FetchSharedResponse/noSpans", &FetchSharedResponse{FetchResponse: FetchResponse{ErrorCode: ErrInvalidRequest}}},

		{"ListOffsetsRequest", &ListOffsetsRequest{ReplicaID: -1, IsolationLevel: ReadUncommitted, Topics: []ListOffsetsRequestTopic{
			{Topic: "orders", Partitions: []ListOffsetsRequestPartition{
				{Partition: 0, CurrentLeaderEpoch: -1, Timestamp: LatestTimestamp},
				{Partition: 1, CurrentLeaderEpoch: 2, Timestamp: EarliestTimestamp},
				{Partition: 2, CurrentLeaderEpoch: 2, Timestamp: 1700000000000},
			}},
		}}},
		{"ListOffsetsResponse", &ListOffsetsResponse{ThrottleMs: 6, Topics: []ListOffsetsResponseTopic{
			{Topic: "orders", Partitions: []ListOffsetsResponsePartition{
				{Partition: 0, Timestamp: -1, Offset: 1000, LeaderEpoch: 3},
				{Partition: 1, ErrorCode: ErrNotLeaderOrFollower, Timestamp: -1, Offset: -1, LeaderEpoch: -1},
			}},
		}}},

		{"OffsetCommitRequest", &OffsetCommitRequest{GroupID: "g", GenerationID: -1, MemberID: "", Topics: []OffsetCommitRequestTopic{
			{Topic: "orders", Partitions: []OffsetCommitRequestPartition{
				{Partition: 0, Offset: 10, LeaderEpoch: 3, Metadata: sp("host-a")},
				{Partition: 1, Offset: 20, LeaderEpoch: -1, Metadata: nil},
				{Partition: 2, Offset: 30, LeaderEpoch: -1, Metadata: sp("")},
			}},
		}}},
		{"OffsetCommitResponse", &OffsetCommitResponse{Topics: []OffsetCommitResponseTopic{
			{Topic: "orders", Partitions: []PartitionResult{{Partition: 0}, {Partition: 1, ErrorCode: ErrIllegalGeneration}}},
		}}},

		{"OffsetFetchRequest/all", &OffsetFetchRequest{GroupID: "g", Topics: nil}},
		{"OffsetFetchRequest/none", &OffsetFetchRequest{GroupID: "g", Topics: []OffsetFetchRequestTopic{}}},
		{"OffsetFetchRequest/some", &OffsetFetchRequest{GroupID: "g", Topics: []OffsetFetchRequestTopic{
			{Topic: "orders", Partitions: []int32{0, 1, 2}},
		}}},
		{"OffsetFetchResponse", &OffsetFetchResponse{ThrottleMs: 8, ErrorCode: NoError, Topics: []OffsetFetchResponseTopic{
			{Topic: "orders", Partitions: []OffsetFetchResponsePartition{
				{Partition: 0, Offset: 10, LeaderEpoch: 3, Metadata: sp("m")},
				{Partition: 1, Offset: -1, LeaderEpoch: -1, Metadata: nil},
				{Partition: 2, Offset: 5, LeaderEpoch: -1, Metadata: sp(""), ErrorCode: ErrUnstableOffsetCommit},
			}},
		}}},
		{"OffsetFetchResponse/loading", &OffsetFetchResponse{ErrorCode: ErrCoordinatorLoadInProgress}},

		{"ListGroupsRequest", &ListGroupsRequest{}},
		{"ListGroupsRequest/v1", &ListGroupsRequest{Version: 1, StatesFilter: []string{"Stable", "Empty"}}},
		{"ListGroupsRequest/v1-all", &ListGroupsRequest{Version: 1}},
		{"ListGroupsResponse/v1", &ListGroupsResponse{Version: 1, Groups: []ListedGroup{{GroupID: "billing", ProtocolType: "consumer", GroupState: "Stable"}, {GroupID: "idle", GroupState: "Empty"}}}},
		{"OffsetCommitRequest/v1", &OffsetCommitRequest{Version: 1, GroupID: "g", GenerationID: 4, MemberID: "m-1", GroupInstanceID: sp("host-a"), Topics: []OffsetCommitRequestTopic{
			{Topic: "t", Partitions: []OffsetCommitRequestPartition{{Partition: 0, Offset: 9, LeaderEpoch: 2}}}}}},
		{"OffsetCommitRequest/v1-dynamic", &OffsetCommitRequest{Version: 1, GroupID: "g", GenerationID: 4, MemberID: "m-1"}},
		{"FindCoordinatorRequest", &FindCoordinatorRequest{CoordinatorKey: "orders-app"}},
		{"FindCoordinatorResponse", &FindCoordinatorResponse{ThrottleMs: 1, NodeID: 2, Host: "127.0.0.1", Port: 9093}},
		{"FindCoordinatorResponse/error", &FindCoordinatorResponse{ErrorCode: ErrCoordinatorNotAvailable, ErrorMessage: sp("being created"), NodeID: -1, Port: -1}},
		{"JoinGroupRequest", &JoinGroupRequest{GroupID: "g", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 300000, MemberID: "m-1", GroupInstanceID: sp("host-a"),
			ProtocolType: "consumer", Protocols: []JoinGroupProtocol{{Name: "range", Metadata: []byte{0, 1, 2}}, {Name: "cooperative-sticky", Metadata: []byte{}}}, Reason: sp("rejoin")}},
		{"JoinGroupRequest/new", &JoinGroupRequest{GroupID: "g", SessionTimeoutMs: 10000, ProtocolType: "consumer", Protocols: []JoinGroupProtocol{{Name: "range"}}}},
		{"JoinGroupResponse/leader", &JoinGroupResponse{GenerationID: 3, ProtocolType: sp("consumer"), ProtocolName: sp("range"), Leader: "m-1", MemberID: "m-1",
			Members: []JoinGroupMember{{MemberID: "m-1", Metadata: []byte{1}}, {MemberID: "m-2", GroupInstanceID: sp("host-b"), Metadata: []byte{}}}}},
		{"JoinGroupResponse/static-leader", &JoinGroupResponse{GenerationID: 3, Leader: "m-9", MemberID: "m-9", SkipAssignment: true}},
		{"JoinGroupResponse/member-id-required", &JoinGroupResponse{ErrorCode: ErrMemberIDRequired, GenerationID: -1, MemberID: "c-1-abc"}},
		{"SyncGroupRequest/leader", &SyncGroupRequest{GroupID: "g", GenerationID: 3, MemberID: "m-1", GroupInstanceID: sp("host-a"), ProtocolType: sp("consumer"), ProtocolName: sp("range"),
			Assignments: []SyncGroupAssignment{{MemberID: "m-1", Assignment: []byte{0, 1}}, {MemberID: "m-2", Assignment: []byte{}}}}},
		{"SyncGroupRequest/follower", &SyncGroupRequest{GroupID: "g", GenerationID: 3, MemberID: "m-2"}},
		{"SyncGroupResponse", &SyncGroupResponse{ProtocolType: sp("consumer"), ProtocolName: sp("range"), Assignment: []byte{0, 1, 2}}},
		{"SyncGroupResponse/error", &SyncGroupResponse{ErrorCode: ErrRebalanceInProgress}},
		{"HeartbeatRequest", &HeartbeatRequest{GroupID: "g", GenerationID: 3, MemberID: "m-1", GroupInstanceID: sp("host-a")}},
		{"HeartbeatRequest/dynamic", &HeartbeatRequest{GroupID: "g", GenerationID: 3, MemberID: "m-1"}},
		{"HeartbeatResponse", &HeartbeatResponse{ThrottleMs: 1, ErrorCode: ErrRebalanceInProgress}},
		{"LeaveGroupRequest", &LeaveGroupRequest{GroupID: "g", Members: []LeaveGroupMember{{MemberID: "m-1", Reason: sp("closing")}, {MemberID: "", GroupInstanceID: sp("host-b")}}}},
		{"LeaveGroupResponse", &LeaveGroupResponse{Members: []LeaveGroupMemberResult{{MemberID: "m-1"}, {GroupInstanceID: sp("host-b"), ErrorCode: ErrUnknownMemberID}}}},
		{"DescribeGroupsRequest", &DescribeGroupsRequest{Groups: []string{"g", "h"}}},
		{"DescribeGroupsResponse", &DescribeGroupsResponse{ThrottleMs: 1, Groups: []DescribedGroup{
			{GroupID: "g", GroupState: "Stable", ProtocolType: "consumer", ProtocolData: "range", Members: []DescribedGroupMember{
				{MemberID: "m-1", GroupInstanceID: sp("host-a"), ClientID: "app", ClientHost: "127.0.0.1", MemberMetadata: []byte{1}, MemberAssignment: []byte{}}}},
			{ErrorCode: ErrNotCoordinator, GroupID: "h"}}}},
		{"OffsetDeleteRequest", &OffsetDeleteRequest{GroupID: "g", Topics: []OffsetDeleteRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}}},
		{"OffsetDeleteResponse", &OffsetDeleteResponse{Topics: []OffsetDeleteResponseTopic{{Topic: "t", Partitions: []PartitionResult{{Partition: 0}, {Partition: 1, ErrorCode: ErrGroupSubscribedToTopic}}}}}},
		{"OffsetDeleteResponse/error", &OffsetDeleteResponse{ErrorCode: ErrGroupIDNotFound}},
		{"ListGroupsResponse", &ListGroupsResponse{ThrottleMs: 2, Groups: []ListedGroup{{GroupID: "billing"}, {GroupID: "audit", ProtocolType: "consumer"}}}},
		{"ListGroupsResponse/none", &ListGroupsResponse{}},
		{"ListGroupsResponse/loading", &ListGroupsResponse{ErrorCode: ErrCoordinatorLoadInProgress}},
		{"CreatePartitionsRequest", &CreatePartitionsRequest{Topics: []CreatePartitionsTopic{
			{Topic: "orders", Count: 6, Assignments: []CreatePartitionsAssignment{{BrokerIDs: []int32{1, 2}}, {}}},
			{Topic: "placed", Count: 3},
		}, TimeoutMs: 30000, ValidateOnly: true}},
		{"CreatePartitionsRequest/emptyAssignments", &CreatePartitionsRequest{Topics: []CreatePartitionsTopic{{Topic: "t", Count: 2, Assignments: []CreatePartitionsAssignment{}}}}},
		{"CreatePartitionsResponse", &CreatePartitionsResponse{ThrottleMs: 2, Results: []CreatePartitionsResult{
			{Topic: "orders"}, {Topic: "placed", ErrorCode: ErrInvalidPartitions, ErrorMessage: sp("3 is not more than 3")}}}},
		{"ElectLeadersRequest/all", &ElectLeadersRequest{ElectionType: ElectionUnclean, TimeoutMs: 100}},
		{"ElectLeadersRequest/some", &ElectLeadersRequest{Topics: []ElectLeadersTopic{{Topic: "orders", Partitions: []int32{0, 2}}, {Topic: "x"}}}},
		{"ElectLeadersRequest/none", &ElectLeadersRequest{Topics: []ElectLeadersTopic{}}},
		{"ElectLeadersResponse", &ElectLeadersResponse{ThrottleMs: 1, Topics: []ElectLeadersResult{{Topic: "orders", Partitions: []ElectLeadersPartitionResult{
			{Partition: 0}, {Partition: 2, ErrorCode: ErrElectionNotNeeded, ErrorMessage: sp("broker 1 leads already")}}}}}},
		{"ElectLeadersResponse/error", &ElectLeadersResponse{ErrorCode: ErrNotController}},
		{"AlterPartitionReassignmentsRequest", &AlterPartitionReassignmentsRequest{TimeoutMs: 30000, Topics: []ReassignTopic{
			{Topic: "orders", Partitions: []ReassignPartition{{Partition: 0, Replicas: []int32{2, 3}}, {Partition: 1}, {Partition: 2, Replicas: []int32{}}}}}}},
		{"AlterPartitionReassignmentsRequest/none", &AlterPartitionReassignmentsRequest{}},
		{"AlterPartitionReassignmentsResponse", &AlterPartitionReassignmentsResponse{ThrottleMs: 4, ErrorCode: ErrInvalidReplicaAssignment,
			ErrorMessage: sp("orders-2: empty replica list"), Topics: []ReassignTopicResult{{Topic: "orders", Partitions: []ReassignPartitionResult{
				{Partition: 0}, {Partition: 2, ErrorCode: ErrInvalidReplicaAssignment, ErrorMessage: sp("empty replica list")}}}}}},
		{"ListPartitionReassignmentsRequest/all", &ListPartitionReassignmentsRequest{TimeoutMs: 5}},
		{"ListPartitionReassignmentsRequest/some", &ListPartitionReassignmentsRequest{Topics: []ListReassignTopic{{Topic: "orders", Partitions: []int32{1}}}}},
		{"ListPartitionReassignmentsRequest/none", &ListPartitionReassignmentsRequest{Topics: []ListReassignTopic{}}},
		{"ListPartitionReassignmentsResponse", &ListPartitionReassignmentsResponse{Topics: []ListedReassignTopic{{Topic: "orders", Partitions: []ListedReassignPartition{
			{Partition: 0, Replicas: []int32{2, 3, 1}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{1}}}}}}},
		{"DeleteGroupsRequest", &DeleteGroupsRequest{Groups: []string{"billing", ""}}},
		{"DeleteGroupsResponse", &DeleteGroupsResponse{ThrottleMs: 3, Results: []DeleteGroupsResult{{GroupID: "billing"}, {GroupID: "audit", ErrorCode: ErrGroupIDNotFound}}}},
		{"DeleteGroupsResponse/none", &DeleteGroupsResponse{}},
		{"InitProducerIDRequest", &InitProducerIDRequest{TransactionTimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1}},
		{"InitProducerIDRequest/transactional", &InitProducerIDRequest{TransactionalID: sp("tx-1"), TransactionTimeoutMs: 1, ProducerID: 7, ProducerEpoch: 3}},
		{"InitProducerIDResponse", &InitProducerIDResponse{ThrottleMs: 1, ProducerID: 4000, ProducerEpoch: 0}},
		{"InitProducerIDResponse/error", &InitProducerIDResponse{ErrorCode: ErrCoordinatorNotAvailable, ProducerID: -1, ProducerEpoch: -1}},
		{"DescribeClusterRequest", &DescribeClusterRequest{}},
		{"DescribeClusterResponse", &DescribeClusterResponse{ThrottleMs: 1, ClusterID: "c-1", ControllerID: 2, Brokers: []DescribeClusterBroker{
			{BrokerID: 0, Host: "10.0.0.1", Port: 9092, Rack: sp("r1"), UnixPath: "/var/run/sluice.sock"},
			{BrokerID: 1, Host: "10.0.0.2", Port: 9092, State: BrokerFenced},
			{BrokerID: 2, Host: "10.0.0.3", Port: 9092, State: BrokerShuttingDown},
		}}},
		{"DescribeClusterResponse/error", &DescribeClusterResponse{ErrorCode: ErrUnknownServerError, ErrorMessage: sp("boom"), ControllerID: -1}},
		{"DescribeClusterResponse/none", &DescribeClusterResponse{ControllerID: -1, ErrorMessage: sp("")}},

		{"OffsetForLeaderEpochRequest", &OffsetForLeaderEpochRequest{ReplicaID: 2, Topics: []OffsetForLeaderEpochTopic{
			{Topic: "orders", Partitions: []OffsetForLeaderEpochPartition{
				{Partition: 0, CurrentLeaderEpoch: 5, LeaderEpoch: 4},
				{Partition: 1, CurrentLeaderEpoch: -1, LeaderEpoch: 0},
			}},
			{Topic: "empty"},
		}}},
		{"OffsetForLeaderEpochRequest/none", &OffsetForLeaderEpochRequest{ReplicaID: -2}},
		{"OffsetForLeaderEpochResponse", &OffsetForLeaderEpochResponse{ThrottleMs: 3, Topics: []OffsetForLeaderEpochTopicResult{
			{Topic: "orders", Partitions: []OffsetForLeaderEpochPartitionResult{
				{Partition: 0, LeaderEpoch: 4, EndOffset: 1200},
				{Partition: 1, ErrorCode: ErrFencedLeaderEpoch, LeaderEpoch: -1, EndOffset: -1},
				{Partition: 2, ErrorCode: ErrNotLeaderOrFollower, LeaderEpoch: -1, EndOffset: -1},
			}},
		}}},
		{"OffsetForLeaderEpochResponse/none", &OffsetForLeaderEpochResponse{}},

		{"DescribeReplicasRequest/all", &DescribeReplicasRequest{}},
		{"DescribeReplicasRequest/some", &DescribeReplicasRequest{Topics: []string{"orders", "clicks"}}},
		{"DescribeReplicasResponse", &DescribeReplicasResponse{ThrottleMs: 1, Topics: []DescribeReplicasTopic{
			{Topic: "orders", Partitions: []DescribeReplicasPartition{
				{Partition: 0, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9, HighWatermark: 90, LogStartOffset: 10, LogEndOffset: 100, DurableOffset: 95,
					ISR: []int32{1, 2}, PendingISR: []int32{1, 2, 3}, Replicas: []DescribeReplicasReplica{
						{ReplicaID: 1, LogEndOffset: 100, DurableOffset: 95, Lag: 0, SinceCaughtUpMs: 0, InISR: true, LagBytes: -1},
						{ReplicaID: 2, LogEndOffset: 90, DurableOffset: 90, Lag: 10, SinceCaughtUpMs: 12, InISR: true, LagBytes: -1},
						{ReplicaID: 3, LogEndOffset: -1, DurableOffset: -1, Lag: -1, SinceCaughtUpMs: -1, LagBytes: -1},
					}},
				{Partition: 1, ErrorCode: ErrNotLeaderOrFollower, Leader: 2, LeaderEpoch: -1, PartitionEpoch: -1, HighWatermark: -1, LogStartOffset: -1,
					LogEndOffset: -1, DurableOffset: -1, PendingISR: nil},
				{Partition: 2, Leader: 1, PendingISR: []int32{}},
			}},
			{Topic: "nope", ErrorCode: ErrUnknownTopicOrPartition},
		}}},
		{"DescribeReplicasResponse/none", &DescribeReplicasResponse{}},
		{"DescribeReplicasRequest/v1", &DescribeReplicasRequest{Version: 1, Topics: []string{"orders"}}},
		{"DescribeReplicasResponse/v1", &DescribeReplicasResponse{Version: 1, Topics: []DescribeReplicasTopic{{Topic: "orders", Partitions: []DescribeReplicasPartition{
			{Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []DescribeReplicasReplica{
				{ReplicaID: 1, LogEndOffset: 100, InISR: true}, {ReplicaID: 4, LogEndOffset: 40, Lag: 60, SinceCaughtUpMs: -1, LagBytes: 61440}}}}}}}},
	}
}

// sampleFetchRequestV2 is an incremental fetch of a follower's session: changed partitions,
// their durable offsets, and forgotten ones.
func sampleFetchRequestV2() *FetchRequest {
	return &FetchRequest{Version: 2, ReplicaID: 3, MaxWaitMs: 500, MinBytes: 1, MaxBytes: 10 << 20, IsolationLevel: ReadUncommitted,
		SessionID: 0x1234567, SessionEpoch: 7,
		Topics: []FetchRequestTopic{{Topic: "orders", Partitions: []FetchRequestPartition{
			{Partition: 0, CurrentLeaderEpoch: 3, FetchOffset: 42, LogStartOffset: 0, PartitionMaxBytes: 1 << 20, DurableOffset: 40},
			{Partition: 2, CurrentLeaderEpoch: 3, FetchOffset: 9, LogStartOffset: 0, PartitionMaxBytes: 1 << 20, DurableOffset: -1},
		}}},
		Forgotten: []FetchForgottenTopic{{Topic: "orders", Partitions: []int32{1, 5}}, {Topic: "gone"}},
	}
}

// sampleFetchResponseV2 is sampleFetchResponseV1 answering a session.
func sampleFetchResponseV2() *FetchResponse {
	f := sampleFetchResponseV1()
	f.Version = 2
	f.SessionID = 0x1234567
	return f
}

// sampleFetchResponse has two topics, null, empty and non-empty records, so
// the segmented encoder meets every case.
func sampleFetchResponse() *FetchResponse {
	return &FetchResponse{ThrottleMs: 9, Topics: []FetchResponseTopic{
		{Topic: "orders", Partitions: []FetchResponsePartition{
			{Partition: 0, HighWatermark: 100, LastStableOffset: 100, LogStartOffset: 0, CurrentLeader: NoLeaderHint, Records: []byte("records of partition zero")},
			{Partition: 1, ErrorCode: ErrOffsetOutOfRange, HighWatermark: 50, LastStableOffset: 50, LogStartOffset: 10, CurrentLeader: NoLeaderHint, Records: nil},
			{Partition: 2, HighWatermark: 7, LastStableOffset: 7, LogStartOffset: 7, CurrentLeader: NoLeaderHint, Records: []byte{}},
		}},
		{Topic: "clicks", Partitions: []FetchResponsePartition{
			{Partition: 3, HighWatermark: 1, LastStableOffset: 1, CurrentLeader: NoLeaderHint, Records: []byte{0xde, 0xad}},
		}},
		{Topic: "empty"},
	}}
}

// sampleFetchResponseV1 is sampleFetchResponse in v1, with a leader hint on one partition.
func sampleFetchResponseV1() *FetchResponse {
	f := sampleFetchResponse()
	f.Version = 1
	p := &f.Topics[0].Partitions[1]
	p.ErrorCode, p.CurrentLeader = ErrNotLeaderOrFollower, LeaderHint{LeaderID: 0, LeaderEpoch: 4}
	f.NodeEndpoints = []MetadataBroker{{NodeID: 0, Host: "127.0.0.1", Port: 9092}}
	return f
}
