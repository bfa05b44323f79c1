package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	partitions "github.com/minkhq/mink/pkg/partition"
)

// splitName reads "namespace.name" or "name"; the server fills in the default namespace.
func splitName(s string) (namespace, name string) {
	if i := strings.LastIndexByte(s, '.'); i > 0 {
		return s[:i], s[i+1:]
	}
	return "", s
}

type createOpts struct {
	topic, format, spec string
	columns, properties repeated
	partitionBy         repeated
	// Schema Registry decodings of values and keys.
	valueSubject, message, valueMode  string
	keyFormat, keySubject, keyMessage string
	keyMode                           string
	tableMode                         string
	fs                                *flag.FlagSet // to tell flags given from defaults
}

// repeated is a flag that may be given many times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }

func createFlags(fs *flag.FlagSet) any {
	o := &createOpts{fs: fs}
	fs.StringVar(&o.topic, "topic", "", "Kafka topic (default: the table name)")
	fs.StringVar(&o.format, "format", "json", "value format: json, raw, or through the Schema Registry avro, protobuf or json_schema")
	fs.Var(&o.columns, "column", "a column of a json table, NAME:TYPE[:required][:JSON_PATH] (repeat for each)")
	fs.Var(&o.properties, "property", "a table property, KEY=VALUE (repeat for each)")
	fs.Var(&o.partitionBy, "partition-by", "a partition field, in order (repeat for each): day(event_ts), bucket[16](customer_id), bucket(16, customer_id), truncate[4](name), a column alone for identity, each optionally AS NAME (default: identity(_kafka_partition), the only spec accepted until files are built per partition tuple)")
	fs.StringVar(&o.valueSubject, "value-subject", "", "registry formats: the subject of the values (default: TOPIC-value)")
	fs.StringVar(&o.message, "message", "", "protobuf: the message the values are, fully qualified (default: the schema's first)")
	fs.StringVar(&o.valueMode, "value-schema-mode", "", "registry formats: prefix (the Confluent wire format, the default) or latest (bare values, the subject's latest schema)")
	fs.StringVar(&o.keyFormat, "key-format", "", "decode keys too, into _kafka_key_decoded: avro, protobuf or json_schema (default: keys stay bytes)")
	fs.StringVar(&o.keySubject, "key-subject", "", "the subject of the keys (default: TOPIC-key)")
	fs.StringVar(&o.keyMessage, "key-message", "", "protobuf keys: the message, fully qualified (default: the schema's first)")
	fs.StringVar(&o.keyMode, "key-schema-mode", "", "prefix (the default) or latest, as --value-schema-mode")
	fs.StringVar(&o.tableMode, "mode", "", "append (every record a row, the default) or upsert (the latest record per key; tombstones delete)")
	fs.StringVar(&o.spec, "spec", "", "read the whole CreateTableRequest as JSON from this file (- for stdin); flags given override it")
	return o
}

// recordFormats are the --format values; keyFormats those of --key-format.
var (
	recordFormats = map[string]adminv1.RecordFormat{
		"json": adminv1.RecordFormat_RECORD_FORMAT_JSON, "raw": adminv1.RecordFormat_RECORD_FORMAT_RAW,
		"avro": adminv1.RecordFormat_RECORD_FORMAT_AVRO, "protobuf": adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF,
		"json_schema": adminv1.RecordFormat_RECORD_FORMAT_JSON_SCHEMA,
	}
	keyFormats = map[string]adminv1.RecordFormat{
		"avro": adminv1.RecordFormat_RECORD_FORMAT_AVRO, "protobuf": adminv1.RecordFormat_RECORD_FORMAT_PROTOBUF,
		"json_schema": adminv1.RecordFormat_RECORD_FORMAT_JSON_SCHEMA,
	}
	schemaModes = map[string]adminv1.SchemaMode{
		"prefix": adminv1.SchemaMode_SCHEMA_MODE_PREFIX, "latest": adminv1.SchemaMode_SCHEMA_MODE_LATEST,
	}
	tableModes = map[string]adminv1.TableMode{
		"append": adminv1.TableMode_TABLE_MODE_APPEND, "upsert": adminv1.TableMode_TABLE_MODE_UPSERT,
	}
)

// choice reads a flag's value from a fixed set, or says which values there are.
func choice[T any](flagName, v string, from map[string]T, want string) (T, error) {
	if t, ok := from[strings.ToLower(v)]; ok {
		return t, nil
	}
	var zero T
	return zero, usageError{fmt.Sprintf("--%s: want %s, got %q", flagName, want, v)}
}

// parseColumn reads NAME:TYPE[:required][:JSON_PATH], as --column and --add take it.
func parseColumn(flagName, col string) (*adminv1.Column, error) {
	parts := strings.SplitN(col, ":", 4)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return nil, usageError{fmt.Sprintf("--%s %q: want NAME:TYPE[:required][:JSON_PATH]", flagName, col)}
	}
	pc := &adminv1.Column{Name: parts[0], Type: parts[1]}
	rest := parts[2:]
	if len(rest) > 0 && rest[0] == "required" {
		pc.Required, rest = true, rest[1:]
	} else if len(rest) > 0 && rest[0] == "" {
		rest = rest[1:]
	}
	if len(rest) > 0 {
		pc.JsonPath = strings.Join(rest, ":")
	}
	return pc, nil
}

// parseProperty reads KEY=VALUE.
func parseProperty(flagName, p string) (string, string, error) {
	k, v, ok := strings.Cut(p, "=")
	if !ok || k == "" {
		return "", "", usageError{fmt.Sprintf("--%s %q: want KEY=VALUE", flagName, p)}
	}
	return k, v, nil
}

func (c *cli) tableCreate(ctx context.Context, args []string, f any) error {
	o := f.(*createOpts)
	given := map[string]bool{}
	o.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	req := &adminv1.CreateTableRequest{}
	if o.spec != "" {
		var b []byte
		var err error
		if o.spec == "-" {
			b, err = io.ReadAll(os.Stdin)
		} else {
			b, err = os.ReadFile(o.spec)
		}
		if err != nil {
			return usageError{fmt.Sprintf("--spec: %v", err)}
		}
		if err := protojson.Unmarshal(b, req); err != nil {
			return usageError{fmt.Sprintf("--spec: %v", err)}
		}
	}
	ns, name := splitName(args[0])
	if ns != "" {
		req.Namespace = ns
	}
	req.Name = name
	if o.topic != "" {
		req.Topic = o.topic
	} else if req.Topic == "" {
		req.Topic = name
	}
	if o.spec == "" || given["format"] {
		v, err := choice("format", o.format, recordFormats, "json, raw, avro, protobuf or json_schema")
		if err != nil {
			return err
		}
		req.Format = v
	}
	for _, s := range []struct {
		dst  *string
		flag string
		v    string
	}{{&req.ValueSubject, "value-subject", o.valueSubject}, {&req.Message, "message", o.message},
		{&req.KeySubject, "key-subject", o.keySubject}, {&req.KeyMessage, "key-message", o.keyMessage}} {
		if given[s.flag] {
			*s.dst = s.v
		}
	}
	if given["value-schema-mode"] {
		m, err := choice("value-schema-mode", o.valueMode, schemaModes, "prefix or latest")
		if err != nil {
			return err
		}
		req.ValueSchemaMode = m
	}
	if given["key-format"] {
		k, err := choice("key-format", o.keyFormat, keyFormats, "avro, protobuf or json_schema (leave it out to keep keys as bytes)")
		if err != nil {
			return err
		}
		req.KeyFormat = k
	}
	if given["mode"] {
		m, err := choice("mode", o.tableMode, tableModes, "append or upsert")
		if err != nil {
			return err
		}
		req.Mode = m
	}
	if given["key-schema-mode"] {
		m, err := choice("key-schema-mode", o.keyMode, schemaModes, "prefix or latest")
		if err != nil {
			return err
		}
		req.KeySchemaMode = m
	}
	for _, col := range o.columns {
		pc, err := parseColumn("column", col)
		if err != nil {
			return err
		}
		req.Columns = append(req.Columns, pc)
	}
	for _, p := range o.properties {
		k, v, err := parseProperty("property", p)
		if err != nil {
			return err
		}
		if req.Properties == nil {
			req.Properties = map[string]string{}
		}
		req.Properties[k] = v
	}
	if len(o.partitionBy) > 0 {
		req.PartitionSpec = nil
		for _, p := range o.partitionBy {
			pf, err := partitions.Parse(p)
			if err != nil {
				return usageError{fmt.Sprintf("--partition-by %q: %v", p, err)}
			}
			req.PartitionSpec = append(req.PartitionSpec, &adminv1.PartitionField{Column: pf.Column, Transform: pf.Transform.String(), Name: pf.Name})
		}
	}
	req.Node = c.node
	resp, err := c.client.CreateTable(ctx, req)
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) { printTable(w, resp.GetTable()) })
}

// alterOpts are the changes of `table alter`, column changes in the order given (they
// apply in order: --rename a:b --widen b:long widens the renamed column).
type alterOpts struct {
	changes    []alterArg
	set, unset repeated
}

type alterArg struct{ flag, value string }

// changeFlag is a repeatable flag whose every value is one column change, kept in order
// with the other changes.
type changeFlag struct {
	name string
	o    *alterOpts
}

func (f changeFlag) String() string { return "" }
func (f changeFlag) Set(s string) error {
	f.o.changes = append(f.o.changes, alterArg{f.name, s})
	return nil
}

func alterFlags(fs *flag.FlagSet) any {
	o := &alterOpts{}
	fs.Var(changeFlag{"add", o}, "add", "json tables: add a column, NAME:TYPE[:required][:JSON_PATH] (repeatable)")
	fs.Var(changeFlag{"widen", o}, "widen", "json tables: widen a column, NAME:TYPE (int to long, float to double, decimal(P,S) to decimal(P2,S), also in lists) (repeatable)")
	fs.Var(changeFlag{"optional", o}, "optional", "json tables: make column NAME optional (repeatable)")
	fs.Var(changeFlag{"rename", o}, "rename", "json tables: rename a column, OLD:NEW; it keeps its field id and the JSON key it reads (repeatable)")
	fs.Var(&o.set, "set", "set a table property, KEY=VALUE (repeatable)")
	fs.Var(&o.unset, "unset", "remove a table property, KEY (repeatable)")
	return o
}

// alterRequest turns the flags of `table alter` into its request.
func alterRequest(o *alterOpts) (*adminv1.AlterTableRequest, error) {
	req := &adminv1.AlterTableRequest{}
	for _, a := range o.changes {
		var ch adminv1.ColumnChange
		switch a.flag {
		case "add":
			col, err := parseColumn("add", a.value)
			if err != nil {
				return nil, err
			}
			ch.Change = &adminv1.ColumnChange_Add{Add: col}
		case "widen":
			name, typ, ok := strings.Cut(a.value, ":")
			if !ok || name == "" || typ == "" {
				return nil, usageError{fmt.Sprintf("--widen %q: want NAME:TYPE", a.value)}
			}
			ch.Change = &adminv1.ColumnChange_Widen{Widen: &adminv1.WidenColumn{Name: name, Type: typ}}
		case "optional":
			if a.value == "" || strings.Contains(a.value, ":") {
				return nil, usageError{fmt.Sprintf("--optional %q: want a column NAME", a.value)}
			}
			ch.Change = &adminv1.ColumnChange_MakeOptional{MakeOptional: a.value}
		case "rename":
			old, nw, ok := strings.Cut(a.value, ":")
			if !ok || old == "" || nw == "" {
				return nil, usageError{fmt.Sprintf("--rename %q: want OLD:NEW", a.value)}
			}
			ch.Change = &adminv1.ColumnChange_Rename{Rename: &adminv1.RenameColumn{Name: old, NewName: nw}}
		}
		req.Changes = append(req.Changes, &ch)
	}
	for _, p := range o.set {
		k, v, err := parseProperty("set", p)
		if err != nil {
			return nil, err
		}
		if req.SetProperties == nil {
			req.SetProperties = map[string]string{}
		}
		req.SetProperties[k] = v
	}
	for _, k := range o.unset {
		if k == "" || strings.Contains(k, "=") {
			return nil, usageError{fmt.Sprintf("--unset %q: want a property KEY", k)}
		}
		req.RemoveProperties = append(req.RemoveProperties, k)
	}
	if len(req.Changes) == 0 && len(req.SetProperties) == 0 && len(req.RemoveProperties) == 0 {
		return nil, usageError{"table alter: nothing to change (give --add, --widen, --optional, --rename, --set or --unset)"}
	}
	return req, nil
}

func (c *cli) tableAlter(ctx context.Context, args []string, f any) error {
	req, err := alterRequest(f.(*alterOpts))
	if err != nil {
		return err
	}
	req.Node = c.node
	req.Namespace, req.Name = splitName(args[0])
	resp, err := c.client.AlterTable(ctx, req)
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) { printTable(w, resp.GetTable()) })
}

func (c *cli) tableDrop(ctx context.Context, args []string, _ any) error {
	ns, name := splitName(args[0])
	resp, err := c.client.DropTable(ctx, &adminv1.DropTableRequest{Node: c.node, Namespace: ns, Name: name})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) { fmt.Fprintf(w, "dropped %s\n", args[0]) })
}

// tableReset starts a table over from its topic as Kafka has it now: after the topic was
// deleted and created again (table describe says so).
func (c *cli) tableReset(ctx context.Context, args []string, _ any) error {
	ns, name := splitName(args[0])
	resp, err := c.client.ResetTable(ctx, &adminv1.ResetTableRequest{Node: c.node, Namespace: ns, Name: name})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) {
		fmt.Fprintf(w, "reset %s: it indexes topic %s anew from its first offset\n\n", args[0], resp.GetTable().GetTopic())
		printTable(w, resp.GetTable())
	})
}

func listFlags(fs *flag.FlagSet) any {
	return fs.String("namespace", "", "only this namespace")
}

func (c *cli) tableList(ctx context.Context, _ []string, f any) error {
	resp, err := c.client.ListTables(ctx, &adminv1.ListTablesRequest{Node: c.node, Namespace: *f.(*string)})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) { printTables(w, resp.GetTables()) })
}

func (c *cli) tableDescribe(ctx context.Context, args []string, _ any) error {
	ns, name := splitName(args[0])
	resp, err := c.client.DescribeTable(ctx, &adminv1.DescribeTableRequest{Node: c.node, Namespace: ns, Name: name})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) { printDescribe(w, resp) })
}
