// Package tableadmin serves the admin API's table calls (create, drop, list, describe)
// over the tables and the index in Postgres and the topics in Kafka. Every role serves
// it: a table can be created through any node. Who may call which method is decided at
// the node's gRPC door (pkg/auth); what a reader may see of the tables (its patterns) is
// decided here with the caller the door put in the context, by pkg/auth's rules.
package tableadmin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/apache/iceberg-go"
	"github.com/jackc/pgx/v5"

	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/jsoninfer"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/names"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/partition"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/schemapoints"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Service implements admin.Tables.
type Service struct {
	DB     pg.DB
	Kafka  *kafkasrc.Client
	Codecs *tablecodec.Codecs // schema versions and the schema registry

	committed committedCache
}

var formats = map[adminv1.RecordFormat]tableschema.Format{
	adminv1.RecordFormat_RECORD_FORMAT_JSON:        tableschema.FormatJSON,
	adminv1.RecordFormat_RECORD_FORMAT_RAW:         tableschema.FormatRaw,
	adminv1.RecordFormat_RECORD_FORMAT_AVRO:        tableschema.FormatAvro,
	adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF:    tableschema.FormatProtobuf,
	adminv1.RecordFormat_RECORD_FORMAT_JSON_SCHEMA: tableschema.FormatJSONSchema,
}

var modes = map[adminv1.SchemaMode]tableschema.SchemaMode{
	adminv1.SchemaMode_SCHEMA_MODE_UNSPECIFIED: tableschema.ModePrefix,
	adminv1.SchemaMode_SCHEMA_MODE_PREFIX:      tableschema.ModePrefix,
	adminv1.SchemaMode_SCHEMA_MODE_LATEST:      tableschema.ModeLatest,
}

// specOf reads the record format, columns and registry decodings of a request.
func specOf(req *adminv1.CreateTableRequest, topic string) (tableschema.Spec, error) {
	f, ok := formats[req.GetFormat()]
	if !ok {
		return tableschema.Spec{}, apierr.Invalid("format", "unspecified or unknown record format %v (want RECORD_FORMAT_JSON, _RAW, _AVRO, _PROTOBUF or _JSON_SCHEMA)", req.GetFormat())
	}
	spec := tableschema.Spec{Format: f}
	for _, c := range req.GetColumns() {
		spec.Columns = append(spec.Columns, tableschema.Column{Name: c.GetName(), Type: c.GetType(), Required: c.GetRequired(), JSONPath: c.GetJsonPath()})
	}
	if f == tableschema.FormatJSON && len(spec.Columns) == 0 {
		spec.Infer = &tableschema.Inference{} // columns inferred from the records
	}
	mode := func(field string, m adminv1.SchemaMode) (tableschema.SchemaMode, error) {
		if v, ok := modes[m]; ok {
			return v, nil
		}
		return "", apierr.Invalid(field, "unknown schema mode %v", m)
	}
	if f.Registry() {
		m, err := mode("value_schema_mode", req.GetValueSchemaMode())
		if err != nil {
			return spec, err
		}
		spec.Value = &tableschema.Decoding{Format: f, Subject: req.GetValueSubject(), Mode: m, Message: req.GetMessage()}
		if spec.Value.Subject == "" {
			spec.Value.Subject = topic + "-value"
		}
	} else {
		switch {
		case req.GetValueSubject() != "":
			return spec, apierr.Invalid("value_subject", "format %s reads no registry subject", f)
		case req.GetMessage() != "":
			return spec, apierr.Invalid("message", "format %s has no Protobuf message", f)
		case req.GetValueSchemaMode() != adminv1.SchemaMode_SCHEMA_MODE_UNSPECIFIED:
			return spec, apierr.Invalid("value_schema_mode", "format %s has no registry schema", f)
		}
	}
	if kf := req.GetKeyFormat(); kf != adminv1.RecordFormat_RECORD_FORMAT_UNSPECIFIED {
		k, ok := formats[kf]
		if !ok || !k.Registry() {
			return spec, apierr.Invalid("key_format", "keys decode from RECORD_FORMAT_AVRO, _PROTOBUF or _JSON_SCHEMA, not %v (leave it unspecified to keep keys as bytes)", kf)
		}
		m, err := mode("key_schema_mode", req.GetKeySchemaMode())
		if err != nil {
			return spec, err
		}
		spec.Key = &tableschema.Decoding{Format: k, Subject: req.GetKeySubject(), Mode: m, Message: req.GetKeyMessage()}
		if spec.Key.Subject == "" {
			spec.Key.Subject = topic + "-key"
		}
	} else if req.GetKeySubject() != "" || req.GetKeyMessage() != "" || req.GetKeySchemaMode() != adminv1.SchemaMode_SCHEMA_MODE_UNSPECIFIED {
		return spec, apierr.Invalid("key_format", "key_subject, key_message and key_schema_mode need a key_format")
	}
	return spec, nil
}

// partitionSpecOf builds the requested partition spec over the table's first schema
// (fields; nil: its declared columns'); nil when none is asked.
func partitionSpecOf(req []*adminv1.PartitionField, t tables.Table, fields []iceberg.NestedField) (*partition.Spec, error) {
	if len(req) == 0 {
		return nil, nil
	}
	by := make([]partition.Field, len(req))
	for i, f := range req {
		pf, err := partition.NewField(f.GetColumn(), f.GetTransform(), f.GetName())
		if err != nil {
			return nil, apierr.Invalid(fmt.Sprintf("partition_spec[%d]", i), "%v", err)
		}
		by[i] = pf
	}
	if fields == nil {
		var err error
		if fields, err = t.Spec.Fields(); err != nil {
			return nil, apierr.Invalid("format", "%v", err)
		}
	}
	schema := iceberg.NewSchema(tableschema.SchemaID, fields...)
	spec, err := partition.Build(schema, by, nil)
	if err != nil {
		var fe *tableschema.FieldError
		if errors.As(err, &fe) {
			return nil, apierr.Invalid(fe.Field, "%s", fe.Reason)
		}
		return nil, err
	}
	t.PartitionSpec = &spec
	if t.CheckPartitioning(schema) != nil {
		// Until the indexer builds one file per partition tuple, a table said to be
		// partitioned by day(ts) would still be partitioned by _kafka_partition.
		return nil, apierr.New(apierr.Unimplemented,
			"partition_spec: tables partitioned other than by identity(_kafka_partition) are not supported yet (indexing one file per partition tuple is not built: docs/design/partition-specs.md); leave partition_spec empty")
	}
	return &spec, nil
}

// CreateTable checks the definition, then that the topic exists (its partition count is
// the table's), then for registry formats reads the subjects' latest schemas (the first
// version's columns), then creates the table, its first schema version, its index rows
// and its leases in one transaction.
func (s *Service) CreateTable(ctx context.Context, req *adminv1.CreateTableRequest) (*adminv1.CreateTableResponse, error) {
	topic := req.GetTopic()
	if topic == "" {
		topic = req.GetName()
	}
	spec, err := specOf(req, topic)
	if err != nil {
		return nil, err
	}
	mode, err := modeOf(req.GetMode())
	if err != nil {
		return nil, err
	}
	t := tables.Table{Namespace: req.GetNamespace(), Name: req.GetName(), Topic: topic,
		Spec: spec, Properties: req.GetProperties(), Mode: mode}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	id, n, err := s.Kafka.Topic(ctx, t.Topic)
	if errors.Is(err, kafkasrc.ErrUnknownTopic) {
		return nil, noTopic(t.Topic)
	}
	if err != nil {
		return nil, kafkaErr(err)
	}
	t.TopicID = id.String()
	var fields []iceberg.NestedField
	var schemas []tables.RegistrySchema
	if spec.Infer != nil && spec.Key != nil {
		return nil, apierr.Invalid("key_format", "an inferred JSON table (no columns) keeps its keys as bytes; declare its columns to decode keys")
	}
	if spec.Value != nil || spec.Key != nil {
		if t.Spec, fields, schemas, err = s.Codecs.FirstVersion(ctx, spec); err != nil {
			return nil, err
		}
	}
	if spec.Infer != nil {
		samples, err := s.sample(ctx, t.Topic)
		if err != nil {
			return nil, err
		}
		fields, t.Spec.Infer = jsoninfer.First(samples)
	}
	if t.PartitionSpec, err = partitionSpecOf(req.GetPartitionSpec(), t, fields); err != nil {
		return nil, err
	}
	created, err := tables.CreateVersioned(ctx, s.DB, t, n, fields, schemas)
	if err != nil {
		return nil, err
	}
	out, err := s.toProto(ctx, created)
	if err != nil {
		return nil, err
	}
	return &adminv1.CreateTableResponse{Table: out}, nil
}

// AlterTable applies column changes (JSON tables) as a new schema version and the
// property changes, each validated, in one transaction: nothing is applied when any is
// bad. A new version takes effect on each partition at a schema point after every
// record Kafka held when the alter began (and every record a build has recorded): the
// records produced after the alter returns decode with it, the ones a load or a range
// has shown already keep the version they were shown with.
func (s *Service) AlterTable(ctx context.Context, req *adminv1.AlterTableRequest) (*adminv1.AlterTableResponse, error) {
	if err := tableNames(req.GetNamespace(), req.GetName()); err != nil {
		return nil, err
	}
	t, err := tables.Get(ctx, s.DB, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	var changes []tableschema.ColumnChange
	for i, c := range req.GetChanges() {
		switch ch := c.GetChange().(type) {
		case *adminv1.ColumnChange_Add:
			changes = append(changes, tableschema.ColumnChange{Add: &tableschema.Column{Name: ch.Add.GetName(), Type: ch.Add.GetType(),
				Required: ch.Add.GetRequired(), JSONPath: ch.Add.GetJsonPath()}})
		case *adminv1.ColumnChange_Widen:
			changes = append(changes, tableschema.ColumnChange{Widen: &tableschema.Widen{Name: ch.Widen.GetName(), Type: ch.Widen.GetType()}})
		case *adminv1.ColumnChange_MakeOptional:
			if ch.MakeOptional == "" {
				return nil, apierr.Invalid(fmt.Sprintf("changes[%d]", i), "make_optional: empty column name")
			}
			changes = append(changes, tableschema.ColumnChange{Optional: ch.MakeOptional})
		case *adminv1.ColumnChange_Rename:
			changes = append(changes, tableschema.ColumnChange{Rename: &tableschema.Rename{Name: ch.Rename.GetName(), NewName: ch.Rename.GetNewName()}})
		default:
			return nil, apierr.Invalid(fmt.Sprintf("changes[%d]", i), "empty change (want add, widen, make_optional or rename)")
		}
	}
	for _, k := range req.GetRemoveProperties() {
		if _, set := req.GetSetProperties()[k]; set {
			return nil, apierr.Invalid("remove_properties", "%q is also in set_properties", k)
		}
	}
	if len(changes) == 0 && len(req.GetSetProperties()) == 0 && len(req.GetRemoveProperties()) == 0 {
		return nil, apierr.Invalid("changes", "nothing to change (give changes, set_properties or remove_properties)")
	}
	// Where a new version takes effect: past Kafka's end of each partition now, read
	// before the transaction (and past what builds recorded, read in it).
	from := map[int32]int64{}
	if len(changes) > 0 {
		offs, err := s.Kafka.Offsets(ctx, t.Topic)
		if err != nil && !errors.Is(err, kafkasrc.ErrUnknownTopic) {
			return nil, kafkaErr(err)
		}
		for _, o := range offs {
			from[o.Partition] = o.HighWatermark
		}
	}
	// One transaction holding the table's row: the properties are changed from what the
	// alter before left (two alters setting different keys both land), and a column
	// change is never stored without the property change beside it, or the reverse.
	err = pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		props, err := tables.LockForAlter(ctx, tx, &t)
		if err != nil {
			return err
		}
		props = maps.Clone(props)
		if props == nil {
			props = map[string]string{}
		}
		maps.Copy(props, req.GetSetProperties())
		for _, k := range req.GetRemoveProperties() {
			delete(props, k)
		}
		if _, err := tables.ParseProps(props); err != nil {
			return err
		}
		if len(changes) > 0 {
			before, err := s.Codecs.Current(ctx, t)
			if err != nil {
				return err
			}
			v, err := tables.Evolve(ctx, tx, nil, t.ID, func(cur tableschema.Version, lastID int) (tableschema.Spec, []iceberg.NestedField, bool, error) {
				spec, fields, err := cur.Alter(changes, lastID)
				if err != nil {
					var fe *tableschema.FieldError
					if errors.As(err, &fe) {
						return spec, nil, false, apierr.Invalid(fe.Field, "%s", fe.Reason)
					}
					return spec, nil, false, err
				}
				return spec, fields, true, nil
			})
			if err != nil {
				return err
			}
			at := map[int32]int64{}
			for p := range t.Partitions {
				at[p] = from[p]
			}
			if _, err := ranges.AddPoints(ctx, tx, t.ID, at, before, func(d schemapoints.Decoding) schemapoints.Decoding {
				d.Version = v.ID
				return d
			}, objects.RecordedEnds); err != nil {
				return err
			}
		}
		if len(req.GetSetProperties()) > 0 || len(req.GetRemoveProperties()) > 0 {
			return tables.SetProperties(ctx, tx, t.ID, props)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	t, err = tables.GetByID(ctx, s.DB, t.ID)
	if err != nil {
		return nil, err
	}
	out, err := s.toProto(ctx, t)
	if err != nil {
		return nil, err
	}
	return &adminv1.AlterTableResponse{Table: out}, nil
}

// DropTable deletes the table, its index and its leases.
func (s *Service) DropTable(ctx context.Context, req *adminv1.DropTableRequest) (*adminv1.DropTableResponse, error) {
	if err := tableNames(req.GetNamespace(), req.GetName()); err != nil {
		return nil, err
	}
	if err := tables.Drop(ctx, s.DB, req.GetNamespace(), req.GetName()); err != nil {
		return nil, err
	}
	return &adminv1.DropTableResponse{}, nil
}

// ResetTable starts a table over from its topic as Kafka has it now (tables.Reset): what
// an admin does once the topic was deleted and created again.
func (s *Service) ResetTable(ctx context.Context, req *adminv1.ResetTableRequest) (*adminv1.ResetTableResponse, error) {
	if req.GetName() == "" {
		return nil, apierr.Invalid("name", "table name is empty")
	}
	t, err := tables.Get(ctx, s.DB, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	id, n, err := s.Kafka.Topic(ctx, t.Topic)
	if errors.Is(err, kafkasrc.ErrUnknownTopic) {
		return nil, apierr.New(apierr.FailedPrecondition, "table %s cannot be reset: its topic %q does not exist in Kafka; create it, or drop the table", t.FullName(), t.Topic)
	}
	if err != nil {
		return nil, kafkaErr(err)
	}
	reset, err := tables.Reset(ctx, s.DB, t.Namespace, t.Name, id.String(), n)
	if err != nil {
		return nil, err
	}
	out, err := s.toProto(ctx, reset)
	if err != nil {
		return nil, err
	}
	return &adminv1.ResetTableResponse{Table: out}, nil
}

// ListTables lists tables, of one namespace or all: those the caller (auth.FromContext)
// may read, a page at a time when asked, each with its summary when asked.
func (s *Service) ListTables(ctx context.Context, req *adminv1.ListTablesRequest) (*adminv1.ListTablesResponse, error) {
	if err := names.Check("namespace", names.Namespace, req.GetNamespace()); err != nil {
		return nil, err
	}
	size := int(req.GetPageSize())
	if size < 0 {
		return nil, apierr.Invalid("page_size", "must be 0 (every table) or more, got %d", size)
	}
	afterNS, afterName, err := parsePageToken(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	p := auth.FromContext(ctx)
	resp := &adminv1.ListTablesResponse{}
	for {
		// A reader's page is filled from as many of the tables it may not see as it takes.
		ts, err := tables.ListAfter(ctx, s.DB, req.GetNamespace(), afterNS, afterName, size)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			afterNS, afterName = t.Namespace, t.Name
			if !p.CanRead(t.Namespace, t.Name) {
				continue
			}
			var out *adminv1.Table
			if req.GetWithSummary() {
				d, err := s.describe(ctx, t, false)
				if err != nil {
					return nil, err
				}
				out = d.Table
				out.Summary = summarize(d.Partitions, d.CommittedAt)
			} else if out, err = s.toProto(ctx, t); err != nil {
				return nil, err
			}
			resp.Tables = append(resp.Tables, out)
			if size > 0 && len(resp.Tables) == size {
				resp.NextPageToken = pageToken(t)
				return resp, nil
			}
		}
		if size == 0 || len(ts) < size {
			return resp, nil
		}
	}
}

// DescribeTable reports per partition how far indexing has got against Kafka's high
// watermark, and who indexes it. Kafka being down still describes the index, with the
// high watermark and lag left at -1. A table the caller (auth.FromContext) may not read
// is PermissionDenied, whether or not it exists.
func (s *Service) DescribeTable(ctx context.Context, req *adminv1.DescribeTableRequest) (*adminv1.DescribeTableResponse, error) {
	if err := tableNames(req.GetNamespace(), req.GetName()); err != nil {
		return nil, err
	}
	ns := req.GetNamespace()
	if ns == "" {
		ns = tables.DefaultNamespace
	}
	if err := auth.CheckRead(ctx, ns, req.GetName()); err != nil {
		return nil, err
	}
	t, err := tables.Get(ctx, s.DB, ns, req.GetName())
	if err != nil {
		return nil, err
	}
	return s.describe(ctx, t, true)
}

// describe is DescribeTable of t; with files, the current snapshot's files per
// partition are counted (its manifests read).
func (s *Service) describe(ctx context.Context, t tables.Table, files bool) (*adminv1.DescribeTableResponse, error) {
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
	hwm, logStart := map[int32]int64{}, map[int32]int64{}
	topicID, offs, kerr := s.Kafka.TopicOffsets(ctx, t.Topic)
	for _, o := range offs {
		hwm[o.Partition], logStart[o.Partition] = o.HighWatermark, o.LogStart
	}
	out, err := s.toProto(ctx, t)
	if err != nil {
		return nil, err
	}
	c, err := s.committedOf(ctx, t, files)
	if err != nil {
		return nil, err
	}
	resp := &adminv1.DescribeTableResponse{Table: out, CommittedAt: c.at, Snapshots: c.snapshots}
	if files {
		if resp.SchemaVersions, err = s.schemaVersions(ctx, t); err != nil {
			return nil, err
		}
	}
	resp.TopicState, resp.TopicError = topicState(t, topicID, hwm, ps, kerr)
	if t.TopicLost != "" {
		resp.TopicErrorSince = timestamppb.New(t.TopicLostAt)
	}
	for _, p := range ps {
		st := &adminv1.PartitionStatus{Partition: p.Partition, IndexedEndOffset: p.IndexedEnd, RangeCount: p.Ranges,
			HighWatermark: -1, LagRecords: -1, Holder: holders[p.Partition].Holder, Epoch: holders[p.Partition].Epoch,
			CommittedFiles: c.files[p.Partition].Files, CommittedEndOffset: c.files[p.Partition].End}
		if !p.LastRangeAt.IsZero() {
			st.LastRangeTime = timestamppb.New(p.LastRangeAt)
		}
		if p.IndexError != "" {
			st.IndexError = p.IndexError
			st.IndexErrorSince = timestamppb.New(p.IndexErrorAt)
		}
		if h, ok := hwm[p.Partition]; ok {
			st.HighWatermark = h
			if p.Indexed {
				st.LagRecords = max(0, h-p.IndexedEnd)
			} else {
				// Nothing indexed yet: indexing starts at the log start.
				st.LagRecords = max(0, h-logStart[p.Partition])
			}
			st.Lag = partitionLag(p, st.LagRecords)
		}
		resp.Partitions = append(resp.Partitions, st)
	}
	sort.Slice(resp.Partitions, func(i, j int) bool { return resp.Partitions[i].Partition < resp.Partitions[j].Partition })
	return resp, nil
}

// tableNames checks the namespace and the (required) table name of a request, before
// anything looks them up.
func tableNames(ns, name string) error {
	if name == "" {
		return apierr.Invalid("name", "table name is empty")
	}
	if err := names.Check("namespace", names.Namespace, ns); err != nil {
		return err
	}
	return names.Check("name", names.Table, name)
}

// topicState says whether the topic in Kafka (its id and high watermarks, or kerr) is the
// one the table indexed, and if not, why and what to do.
func topicState(t tables.Table, id kafkasrc.TopicID, hwm map[int32]int64, ps []ranges.Partition, kerr error) (adminv1.TopicState, string) {
	reset := fmt.Sprintf("; the table is not served or indexed until an admin resets it (minkctl table reset %s): it then indexes the topic as it is now, from its first offset", t.FullName())
	if t.TopicLost != "" {
		return adminv1.TopicState_TOPIC_STATE_RECREATED, t.TopicLost + reset
	}
	switch {
	case errors.Is(kerr, kafkasrc.ErrUnknownTopic):
		return adminv1.TopicState_TOPIC_STATE_DELETED, fmt.Sprintf("topic %q does not exist in Kafka: it was deleted, and with it the table's rows; indexing is paused and live loads fail until it exists again, and a topic created anew under that name needs the table reset (minkctl table reset %s)", t.Topic, t.FullName())
	case kerr != nil:
		return adminv1.TopicState_TOPIC_STATE_UNREACHABLE, fmt.Sprintf("topic %q: Kafka did not answer: the high watermarks and lag are unknown", t.Topic)
	}
	indexed := map[int32]int64{}
	for _, p := range ps {
		if p.Indexed {
			indexed[p.Partition] = p.IndexedEnd
		}
	}
	if why := tables.TopicChanged(t, id.String(), hwm, indexed); why != "" {
		return adminv1.TopicState_TOPIC_STATE_RECREATED, why + reset
	}
	return adminv1.TopicState_TOPIC_STATE_OK, ""
}

func kafkaErr(err error) error {
	if errors.Is(err, kafkasrc.ErrUnavailable) {
		return apierr.UnavailableErr("kafka", err)
	}
	return apierr.Failed(err, "kafka")
}

func (s *Service) toProto(ctx context.Context, t tables.Table) (*adminv1.Table, error) {
	out := &adminv1.Table{Id: t.ID, Namespace: t.Namespace, Name: t.Name, Topic: t.Topic,
		Properties: t.Properties, Partitions: t.Partitions, CreatedAt: timestamppb.New(t.CreatedAt),
		Format: formatProto(t.Spec.Format), Value: decodingProto(t.Spec.Value), Key: decodingProto(t.Spec.Key),
		SchemaVersion: int32(t.Version), Mode: modeProto(t.Mode), TopicId: t.TopicID}
	for _, c := range t.Spec.Columns {
		out.Columns = append(out.Columns, &adminv1.Column{Name: c.Name, Type: c.Type, Required: c.Required, JsonPath: c.JSONPath})
	}
	v, err := s.Codecs.Version(ctx, t, t.Version)
	if err != nil {
		return nil, err
	}
	out.SchemaId = int32(v.Schema.ID)
	if in := v.Spec.Infer; in != nil {
		// An inferred table's columns are its version's fields, each saying where the
		// data first showed it.
		cols, _ := tableschema.InferredColumns(v.Schema.Fields())
		for _, i := range cols {
			f := v.Schema.Fields()[i]
			c := &adminv1.Column{Name: f.Name, Type: f.Type.String(), InferredSince: in.Since[f.ID]}
			if c.InferredSince == "" {
				c.InferredSince = "alter"
			}
			if k := in.Key(f); k != f.Name {
				c.JsonPath = k
			}
			out.Columns = append(out.Columns, c)
		}
	}
	for _, f := range v.Schema.Fields() {
		out.Schema = append(out.Schema, &adminv1.SchemaColumn{FieldId: int32(f.ID), Name: f.Name, Type: f.Type.String()})
	}
	// The spec stored with the current version, with the columns as its schema names them.
	spec, err := t.Partitioning(v.Schema)
	if err != nil {
		return nil, err
	}
	for _, f := range spec.Describe(v.Schema) {
		out.PartitionSpec = append(out.PartitionSpec, &adminv1.PartitionField{Column: f.Column, Transform: f.Transform.String(), Name: f.Name})
	}
	return out, nil
}

func modeOf(m adminv1.TableMode) (tables.Mode, error) {
	switch m {
	case adminv1.TableMode_TABLE_MODE_UNSPECIFIED, adminv1.TableMode_TABLE_MODE_APPEND:
		return tables.ModeAppend, nil
	case adminv1.TableMode_TABLE_MODE_UPSERT:
		return tables.ModeUpsert, nil
	}
	return "", apierr.Invalid("mode", "unknown table mode %v (want TABLE_MODE_APPEND or TABLE_MODE_UPSERT)", m)
}

func modeProto(m tables.Mode) adminv1.TableMode {
	if m == tables.ModeUpsert {
		return adminv1.TableMode_TABLE_MODE_UPSERT
	}
	return adminv1.TableMode_TABLE_MODE_APPEND
}

func formatProto(f tableschema.Format) adminv1.RecordFormat {
	for pf, sf := range formats {
		if sf == f {
			return pf
		}
	}
	return adminv1.RecordFormat_RECORD_FORMAT_UNSPECIFIED
}

func decodingProto(d *tableschema.Decoding) *adminv1.RegistryDecoding {
	if d == nil {
		return nil
	}
	m := adminv1.SchemaMode_SCHEMA_MODE_PREFIX
	if d.Mode == tableschema.ModeLatest {
		m = adminv1.SchemaMode_SCHEMA_MODE_LATEST
	}
	return &adminv1.RegistryDecoding{Format: formatProto(d.Format), Subject: d.Subject, Mode: m, Message: d.Message}
}
