package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	partspec "github.com/minkhq/mink/pkg/partition"
)

// print writes msg as protojson (-o json) or through table, aligned in columns.
func (c *cli) print(msg proto.Message, table func(w io.Writer)) error {
	if c.output == "json" {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(msg)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// ts shows a database timestamp as UTC to the millisecond; times are never compared with
// this machine's clock, which may differ from the database's.
func ts(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format("2006-01-02T15:04:05.000Z")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func roles(rs []adminv1.Role) string {
	var out []string
	for _, r := range rs {
		out = append(out, strings.ToLower(strings.TrimPrefix(r.String(), "ROLE_")))
	}
	return dash(strings.Join(out, ","))
}

func kind(k adminv1.LeaseKind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "LEASE_KIND_"))
}

func format(f adminv1.RecordFormat) string {
	return strings.ToLower(strings.TrimPrefix(f.String(), "RECORD_FORMAT_"))
}

// kv shows a map as sorted key=value pairs.
func kv(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+m[k])
	}
	return dash(strings.Join(out, " "))
}

func partition(p int32) string {
	if p < 0 {
		return "-"
	}
	return strconv.Itoa(int(p))
}

// authState is whether a node checks credentials, as status prints it.
func authState(on bool) string {
	if on {
		return "on"
	}
	return "off (no --auth-config: anyone who reaches the node may do anything)"
}

func printStatus(w io.Writer, s *adminv1.GetStatusResponse) {
	st := s.GetLeaseStats()
	rows := [][2]string{
		{"NODE", s.GetNodeId()},
		{"ROLES", roles(s.GetRoles())},
		{"VERSION", dash(s.GetVersion())},
		{"STARTED", ts(s.GetStartedAt())},
		{"GRPC", s.GetGrpcAddr()},
		{"ADDRS", kv(s.GetAddrs())},
		{"DRAINING", strconv.FormatBool(s.GetDraining())},
		{"ACTING", strconv.FormatBool(s.GetActing())},
		{"AUTH", authState(s.GetAuthEnabled())},
		{"LEASE TTL", s.GetLeaseTtl().AsDuration().String()},
		{"ROUNDS", fmt.Sprintf("%d ok, %d failed, %d statements, %d rows read, %d written", st.GetRounds(), st.GetFailedRounds(),
			st.GetStatements(), st.GetRowsRead(), st.GetRowsWritten())},
		{"LEASE CHANGES", fmt.Sprintf("%d acquired, %d released, %d lost", st.GetAcquired(), st.GetReleased(), st.GetLost())},
		{"LAST ERROR", dash(s.GetLastError())},
		{"FIGURES", kv(s.GetFigures())},
		{"LEASES", strconv.Itoa(len(s.GetLeases()))},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\n", r[0], r[1])
	}
	if len(s.GetLeases()) > 0 {
		fmt.Fprintln(w)
		printLeases(w, s.GetLeases(), false)
	}
}

func printNodes(w io.Writer, nodes []*adminv1.Node) {
	fmt.Fprintln(w, "NODE\tROLES\tGRPC\tVERSION\tDRAINING\tSTARTED\tRENEWED\tADDRS")
	for _, n := range nodes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%t\t%s\t%s\t%s\n", n.GetNodeId(), roles(n.GetRoles()), n.GetGrpcAddr(),
			dash(n.GetVersion()), n.GetDraining(), ts(n.GetStartedAt()), ts(n.GetRenewedAt()), kv(n.GetAddrs()))
	}
}

func printLeases(w io.Writer, leases []*adminv1.Lease, holder bool) {
	if holder {
		fmt.Fprintln(w, "TABLE_ID\tTABLE\tKIND\tPARTITION\tHOLDER\tEPOCH\tEXPIRES")
	} else {
		fmt.Fprintln(w, "TABLE_ID\tTABLE\tKIND\tPARTITION\tEPOCH\tEXPIRES")
	}
	for _, l := range leases {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t", l.GetTableId(), l.GetTableName(), kind(l.GetKind()), partition(l.GetPartition()))
		if holder {
			fmt.Fprintf(w, "%s\t", dash(l.GetHolder()))
		}
		fmt.Fprintf(w, "%d\t%s\n", l.GetEpoch(), ts(l.GetExpiresAt()))
	}
}

func printTables(w io.Writer, tables []*adminv1.Table) {
	fmt.Fprintln(w, "ID\tNAMESPACE\tNAME\tTOPIC\tFORMAT\tPARTITIONS\tCOLUMNS\tTABLE VERSION\tCREATED")
	for _, t := range tables {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", t.GetId(), t.GetNamespace(), t.GetName(), t.GetTopic(),
			format(t.GetFormat()), t.GetPartitions(), userColumns(t), t.GetSchemaVersion(), ts(t.GetCreatedAt()))
	}
}

// userColumns counts a table's own columns: its current schema's without the Kafka
// columns, or its declared columns when the node sent no schema.
func userColumns(t *adminv1.Table) int {
	if len(t.GetSchema()) == 0 {
		return len(t.GetColumns())
	}
	n := 0
	for _, c := range t.GetSchema() {
		if !isMinkColumn(c.GetName()) {
			n++
		}
	}
	return n
}

// isMinkColumn reports whether a column is one Mink adds (_kafka_*, _mink_*): no user
// column may be named so.
func isMinkColumn(name string) bool {
	lower := strings.ToLower(name)
	return strings.HasPrefix(lower, "_kafka_") || strings.HasPrefix(lower, "_mink_")
}

func mode(m adminv1.SchemaMode) string {
	if m == adminv1.SchemaMode_SCHEMA_MODE_UNSPECIFIED {
		return "prefix"
	}
	return strings.ToLower(strings.TrimPrefix(m.String(), "SCHEMA_MODE_"))
}

// decoding shows how values or keys are read through the Schema Registry.
func decoding(d *adminv1.RegistryDecoding) string {
	parts := []string{format(d.GetFormat()), "subject " + d.GetSubject(), mode(d.GetMode()) + " mode"}
	if d.GetMessage() != "" {
		parts = append(parts, "message "+d.GetMessage())
	}
	return strings.Join(parts, ", ")
}

// printTable shows one table: its definition, then every top-level column of its
// current schema with its Iceberg type (and, for a JSON table, how each is read).
func printTable(w io.Writer, t *adminv1.Table) {
	fmt.Fprintf(w, "TABLE\t%s.%s (id %d)\n", t.GetNamespace(), t.GetName(), t.GetId())
	plural := "s"
	if t.GetPartitions() == 1 {
		plural = ""
	}
	id := ""
	if t.GetTopicId() != "" {
		id = ", topic id " + t.GetTopicId()
	}
	fmt.Fprintf(w, "TOPIC\t%s (%d partition%s%s)\n", t.GetTopic(), t.GetPartitions(), plural, id)
	fmt.Fprintf(w, "FORMAT\t%s\n", format(t.GetFormat()))
	if t.GetMode() == adminv1.TableMode_TABLE_MODE_UPSERT {
		// Only upsert tables say so: append is what a table is unless told otherwise.
		fmt.Fprintf(w, "MODE\tupsert (the latest record per key and partition)\n")
	}
	if t.GetValue() != nil {
		fmt.Fprintf(w, "VALUES\t%s\n", decoding(t.GetValue()))
	}
	if t.GetKey() != nil {
		fmt.Fprintf(w, "KEYS\t%s (column _kafka_key_decoded)\n", decoding(t.GetKey()))
	}
	// The table's own count of its schemas, and Iceberg's id: neither is a registry's.
	fmt.Fprintf(w, "SCHEMA\ttable version %d (Iceberg schema id %d)\n", t.GetSchemaVersion(), t.GetSchemaId())
	if len(t.GetPartitionSpec()) > 0 { // a node from before specs were shown sends none
		fmt.Fprintf(w, "PARTITION\t%s\n", partitionSpec(t.GetPartitionSpec()))
	}
	fmt.Fprintf(w, "PROPERTIES\t%s\n", kv(t.GetProperties()))
	fmt.Fprintf(w, "CREATED\t%s\n", ts(t.GetCreatedAt()))

	declared := map[string]*adminv1.Column{}
	for _, c := range t.GetColumns() {
		declared[c.GetName()] = c
	}
	if len(t.GetSchema()) == 0 { // a node that sends no schema: the declared columns
		fmt.Fprintln(w, "\nCOLUMN\tTYPE\tREQUIRED\tJSON PATH")
		for _, c := range t.GetColumns() {
			fmt.Fprintf(w, "%s\t%s\t%t\t%s\n", c.GetName(), c.GetType(), c.GetRequired(), dash(c.GetJsonPath()))
		}
		return
	}
	if len(declared) == 0 {
		fmt.Fprintln(w, "\nFIELD ID\tCOLUMN\tTYPE")
		for _, c := range t.GetSchema() {
			fmt.Fprintf(w, "%d\t%s\t%s\n", c.GetFieldId(), c.GetName(), c.GetType())
		}
		return
	}
	if inferred := t.GetColumns()[0].GetInferredSince() != ""; inferred {
		// An inferred table: where the data first showed each column.
		fmt.Fprintln(w, "\nFIELD ID\tCOLUMN\tTYPE\tJSON PATH\tINFERRED FROM")
		for _, c := range t.GetSchema() {
			path, since := "-", "-"
			if d, ok := declared[c.GetName()]; ok {
				path, since = c.GetName(), d.GetInferredSince()
				if d.GetJsonPath() != "" {
					path = d.GetJsonPath()
				}
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", c.GetFieldId(), c.GetName(), c.GetType(), path, since)
		}
		return
	}
	fmt.Fprintln(w, "\nFIELD ID\tCOLUMN\tTYPE\tREQUIRED\tJSON PATH")
	for _, c := range t.GetSchema() {
		req, path := "-", "-"
		if d, ok := declared[c.GetName()]; ok {
			req, path = strconv.FormatBool(d.GetRequired()), d.GetName()
			if d.GetJsonPath() != "" {
				path = d.GetJsonPath()
			}
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", c.GetFieldId(), c.GetName(), c.GetType(), req, path)
	}
}

func printDescribe(w io.Writer, d *adminv1.DescribeTableResponse) {
	printTable(w, d.GetTable())
	if st := d.GetTopicState(); st != adminv1.TopicState_TOPIC_STATE_OK && st != adminv1.TopicState_TOPIC_STATE_UNSPECIFIED {
		// First, before the figures it makes meaningless: the topic is not the table's.
		state := strings.TrimPrefix(st.String(), "TOPIC_STATE_")
		if d.GetTopicErrorSince() != nil {
			state += " since " + ts(d.GetTopicErrorSince())
		}
		fmt.Fprintf(w, "TOPIC STATE\t%s: %s\n", state, oneLine(d.GetTopicError()))
	}
	fmt.Fprintln(w, "\nPARTITION\tINDEXED END\tHIGH WATERMARK\tLAG\tRANGES\tLAST RANGE\tHOLDER\tEPOCH\tINDEXING")
	var total int64
	unknown := false
	var paused []*adminv1.PartitionStatus
	for _, p := range d.GetPartitions() {
		if p.GetLagRecords() < 0 {
			unknown = true
		} else {
			total += p.GetLagRecords()
		}
		indexing := "ok"
		if p.GetIndexError() != "" {
			indexing = "paused"
			paused = append(paused, p)
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%d\t%s\t%s\t%d\t%s\n", p.GetPartition(), p.GetIndexedEndOffset(), lag(p.GetHighWatermark()),
			lag(p.GetLagRecords()), p.GetRangeCount(), ts(p.GetLastRangeTime()), dash(p.GetHolder()), p.GetEpoch(), indexing)
	}
	if unknown {
		fmt.Fprintf(w, "TOTAL LAG\t%d records and more (Kafka did not answer for every partition)\n", total)
	} else {
		fmt.Fprintf(w, "TOTAL LAG\t%d records\n", total)
	}
	if len(paused) > 0 {
		// Why indexing is paused (the registry is unreachable, say); it resumes by itself.
		fmt.Fprintln(w, "\nPAUSED PARTITION\tSINCE\tINDEX ERROR")
		for _, p := range paused {
			fmt.Fprintf(w, "%d\t%s\t%s\n", p.GetPartition(), ts(p.GetIndexErrorSince()), oneLine(p.GetIndexError()))
		}
	}
}

// oneLine keeps a message on its line of the aligned output.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// partitionSpec writes a spec as the Iceberg spec writes its fields, transform(column),
// naming a field only where its name is not its column's.
func partitionSpec(fields []*adminv1.PartitionField) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f.GetTransform() + "(" + f.GetColumn() + ")"
		if tr, err := partspec.ParseTransform(f.GetTransform()); err == nil && f.GetName() == partspec.DefaultName(f.GetColumn(), tr) {
			continue // the name Iceberg gives it anyway
		}
		if f.GetName() != f.GetColumn() {
			parts[i] += " AS " + f.GetName()
		}
	}
	return strings.Join(parts, ", ")
}
