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
)

// splitName reads "namespace.name" or "name"; the server fills in the default namespace.
func splitName(s string) (namespace, name string) {
	if i := strings.LastIndexByte(s, '.'); i > 0 {
		return s[:i], s[i+1:]
	}
	return "", s
}

type createOpts struct {
	topic, format, namespace, spec string
	columns, properties            repeated
}

// repeated is a flag that may be given many times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }

func createFlags(fs *flag.FlagSet) any {
	o := &createOpts{}
	fs.StringVar(&o.topic, "topic", "", "Kafka topic (default: the table name)")
	fs.StringVar(&o.format, "format", "json", "record format: json, raw, avro or protobuf")
	fs.Var(&o.columns, "column", "a column, NAME:TYPE[:required][:JSON_PATH] (repeat for each)")
	fs.Var(&o.properties, "property", "a table property, KEY=VALUE (repeat for each)")
	fs.StringVar(&o.spec, "spec", "", "read the whole CreateTableRequest as JSON from this file (- for stdin)")
	return o
}

func (c *cli) tableCreate(ctx context.Context, args []string, f any) error {
	o := f.(*createOpts)
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
	if o.spec == "" || o.format != "json" {
		v, ok := adminv1.RecordFormat_value["RECORD_FORMAT_"+strings.ToUpper(o.format)]
		if !ok {
			return usageError{fmt.Sprintf("--format: want json, raw, avro or protobuf, got %q", o.format)}
		}
		req.Format = adminv1.RecordFormat(v)
	}
	for _, col := range o.columns {
		parts := strings.SplitN(col, ":", 4)
		if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
			return usageError{fmt.Sprintf("--column %q: want NAME:TYPE[:required][:JSON_PATH]", col)}
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
		req.Columns = append(req.Columns, pc)
	}
	for _, p := range o.properties {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return usageError{fmt.Sprintf("--property %q: want KEY=VALUE", p)}
		}
		if req.Properties == nil {
			req.Properties = map[string]string{}
		}
		req.Properties[k] = v
	}
	req.Node = c.node
	resp, err := c.client.CreateTable(ctx, req)
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) { printTables(w, []*adminv1.Table{resp.GetTable()}) })
}

func (c *cli) tableDrop(ctx context.Context, args []string, _ any) error {
	ns, name := splitName(args[0])
	resp, err := c.client.DropTable(ctx, &adminv1.DropTableRequest{Node: c.node, Namespace: ns, Name: name})
	if err != nil {
		return err
	}
	return c.print(resp, func(w io.Writer) { fmt.Fprintf(w, "dropped %s\n", args[0]) })
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
