// Package tableadmin serves the admin API's table calls (create, drop, list, describe)
// over the tables and the index in Postgres and the topics in Kafka. Every role serves
// it: a table can be created through any node.
package tableadmin

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Service implements admin.Tables.
type Service struct {
	DB    lease.DB
	Kafka *kafkasrc.Client
}

var formats = map[adminv1.RecordFormat]tableschema.Format{
	adminv1.RecordFormat_RECORD_FORMAT_JSON:     tableschema.FormatJSON,
	adminv1.RecordFormat_RECORD_FORMAT_RAW:      tableschema.FormatRaw,
	adminv1.RecordFormat_RECORD_FORMAT_AVRO:     tableschema.FormatAvro,
	adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF: tableschema.FormatProtobuf,
}

// CreateTable checks the definition, then that the topic exists (its partition count is
// the table's), then creates the table, its index rows and its leases in one transaction.
func (s *Service) CreateTable(ctx context.Context, req *adminv1.CreateTableRequest) (*adminv1.CreateTableResponse, error) {
	f, ok := formats[req.GetFormat()]
	if !ok {
		return nil, apierr.Invalid("format", "unspecified or unknown record format %v (want RECORD_FORMAT_JSON or RECORD_FORMAT_RAW)", req.GetFormat())
	}
	t := tables.Table{Namespace: req.GetNamespace(), Name: req.GetName(), Topic: req.GetTopic(),
		Spec: tableschema.Spec{Format: f}, Properties: req.GetProperties()}
	for _, c := range req.GetColumns() {
		t.Spec.Columns = append(t.Spec.Columns, tableschema.Column{Name: c.GetName(), Type: c.GetType(), Required: c.GetRequired(), JSONPath: c.GetJsonPath()})
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	n, err := s.Kafka.Partitions(ctx, t.Topic)
	if errors.Is(err, kafkasrc.ErrUnknownTopic) {
		return nil, apierr.Invalid("topic", "topic %q does not exist in Kafka", t.Topic)
	}
	if err != nil {
		return nil, kafkaErr(err)
	}
	created, err := tables.Create(ctx, s.DB, t, n)
	if err != nil {
		return nil, err
	}
	return &adminv1.CreateTableResponse{Table: toProto(created)}, nil
}

// DropTable deletes the table, its index and its leases.
func (s *Service) DropTable(ctx context.Context, req *adminv1.DropTableRequest) (*adminv1.DropTableResponse, error) {
	if req.GetName() == "" {
		return nil, apierr.Invalid("name", "table name is empty")
	}
	if err := tables.Drop(ctx, s.DB, req.GetNamespace(), req.GetName()); err != nil {
		return nil, err
	}
	return &adminv1.DropTableResponse{}, nil
}

// ListTables lists tables, of one namespace or all.
func (s *Service) ListTables(ctx context.Context, req *adminv1.ListTablesRequest) (*adminv1.ListTablesResponse, error) {
	ts, err := tables.List(ctx, s.DB, req.GetNamespace())
	if err != nil {
		return nil, err
	}
	resp := &adminv1.ListTablesResponse{}
	for _, t := range ts {
		resp.Tables = append(resp.Tables, toProto(t))
	}
	return resp, nil
}

// DescribeTable reports per partition how far indexing has got against Kafka's high
// watermark, and who indexes it. Kafka being down still describes the index, with the
// high watermark and lag left at -1.
func (s *Service) DescribeTable(ctx context.Context, req *adminv1.DescribeTableRequest) (*adminv1.DescribeTableResponse, error) {
	if req.GetName() == "" {
		return nil, apierr.Invalid("name", "table name is empty")
	}
	t, err := tables.Get(ctx, s.DB, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	ps, err := ranges.Partitions(ctx, s.DB, t.ID)
	if err != nil {
		return nil, err
	}
	ls, err := lease.ListLeases(ctx, s.DB, t.ID)
	if err != nil {
		return nil, err
	}
	holders := map[int32]lease.Info{}
	for _, l := range ls {
		if l.Kind == lease.KindPartition {
			holders[l.Partition] = l
		}
	}
	hwm := map[int32]int64{}
	if offs, err := s.Kafka.Offsets(ctx, t.Topic); err == nil {
		for _, o := range offs {
			hwm[o.Partition] = o.HighWatermark
		}
	}
	resp := &adminv1.DescribeTableResponse{Table: toProto(t)}
	for _, p := range ps {
		st := &adminv1.PartitionStatus{Partition: p.Partition, IndexedEndOffset: p.IndexedEnd, RangeCount: p.Ranges,
			HighWatermark: -1, LagRecords: -1, Holder: holders[p.Partition].Holder, Epoch: holders[p.Partition].Epoch}
		if !p.LastRangeAt.IsZero() {
			st.LastRangeTime = timestamppb.New(p.LastRangeAt)
		}
		if h, ok := hwm[p.Partition]; ok {
			st.HighWatermark = h
			if p.Indexed {
				st.LagRecords = max(0, h-p.IndexedEnd)
			}
		}
		resp.Partitions = append(resp.Partitions, st)
	}
	sort.Slice(resp.Partitions, func(i, j int) bool { return resp.Partitions[i].Partition < resp.Partitions[j].Partition })
	return resp, nil
}

func kafkaErr(err error) error {
	if errors.Is(err, kafkasrc.ErrUnavailable) {
		return apierr.UnavailableErr("kafka", err)
	}
	return fmt.Errorf("kafka: %w", err)
}

func toProto(t tables.Table) *adminv1.Table {
	out := &adminv1.Table{Id: t.ID, Namespace: t.Namespace, Name: t.Name, Topic: t.Topic,
		Properties: t.Properties, Partitions: t.Partitions, CreatedAt: timestamppb.New(t.CreatedAt)}
	for pf, f := range formats {
		if f == t.Spec.Format {
			out.Format = pf
		}
	}
	for _, c := range t.Spec.Columns {
		out.Columns = append(out.Columns, &adminv1.Column{Name: c.Name, Type: c.Type, Required: c.Required, JsonPath: c.JSONPath})
	}
	return out
}
