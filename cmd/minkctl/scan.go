package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"net"
	"sort"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers the s3:// FileIO the tables' files are read through
	"github.com/apache/iceberg-go/table"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/tablerows"
)

type scanOpts struct {
	catalog string
	limit   int64
	columns string
	from    string
}

func scanFlags(fs *flag.FlagSet) any {
	o := &scanOpts{}
	fs.StringVar(&o.catalog, "catalog", "", "Iceberg REST catalog URL (default: a file server's, as the node at --addr reports it; https:// with --tls)")
	fs.Int64Var(&o.limit, "limit", 100, "most rows to print (0: every row, in the order the files are planned)")
	fs.StringVar(&o.columns, "columns", "", "comma-separated columns to print, in this order (default: every column)")
	fs.StringVar(&o.from, "from", "end", "which rows --limit keeps: end (the newest by Kafka timestamp, the default) or start (the oldest); either way printed oldest first, ordered by _kafka_timestamp, _kafka_partition, _kafka_offset")
	return o
}

// scan reads a table the way any Iceberg engine does: the REST catalog loads it (and
// says where its files are and how to reach Mink's S3 endpoint), then iceberg-go reads
// the data files over S3. It needs no admin API: it is the proof that the read path works.
func (c *cli) scan(ctx context.Context, args []string, f any) error {
	o := f.(*scanOpts)
	if o.limit < 0 {
		return usageError{fmt.Sprintf("--limit: want 0 (every row) or more, got %d", o.limit)}
	}
	if o.from != "start" && o.from != "end" {
		return usageError{fmt.Sprintf("--from: want start (the oldest rows) or end (the newest), got %q", o.from)}
	}
	ident, err := tableIdent(args[0])
	if err != nil {
		return err
	}
	columns, err := splitColumns(o.columns)
	if err != nil {
		return err
	}
	if o.catalog == "" {
		if o.catalog, err = c.findCatalog(ctx); err != nil {
			return err
		}
	}
	ctx, catOpts, err := c.catalogOptions(ctx)
	if err != nil {
		return err
	}
	cat, err := rest.NewCatalog(ctx, "mink", o.catalog, catOpts...)
	if err != nil {
		return c.catalogError(o.catalog, err)
	}
	name := strings.Join(ident, ".")
	tbl, err := cat.LoadTable(ctx, ident)
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable), errors.Is(err, catalog.ErrNoSuchNamespace):
		// The catalog's own words first: a table created seconds ago is registered but has
		// no metadata yet, and the catalog says so.
		return fmt.Errorf("table %s not loaded from catalog %s: %w (minkctl table list shows the registered tables)", name, o.catalog, err)
	case err != nil:
		return fmt.Errorf("load table %s: %w", name, c.catalogError(o.catalog, err))
	}
	var known []string
	for _, fld := range tbl.Schema().Fields() {
		known = append(known, fld.Name)
	}
	for _, col := range columns {
		if _, ok := tbl.Schema().FindFieldByName(col); !ok {
			return usageError{fmt.Sprintf("--columns: table %s has no column %q (it has: %s)", name, col, strings.Join(known, ", "))}
		}
	}
	if len(columns) == 0 {
		columns = known
	}
	p := newRowPrinter(c.stdout, c.output, columns)
	_, err = tablerows.Read(ctx, tbl, columns, o.limit, o.from == "end", p.row)
	if err == nil {
		err = p.done()
	} else {
		p.flush() // what was read before the failure is still worth seeing
	}
	if err != nil {
		return fmt.Errorf("read %s (its data files come from the S3 endpoint the catalog names): %w", name, err)
	}
	if p.n == 0 && tbl.CurrentSnapshot() == nil {
		fmt.Fprintf(c.stderr, "minkctl: %s has no snapshot yet: the writer commits indexed ranges every mink.commit.interval\n", name)
	}
	return nil
}

// findCatalog asks the node at --addr where a catalog is: its own when it is a file
// server (on the host --addr reaches it by: behind a port mapping, as docker compose has
// it, the advertised name is the container's), else the first live file server's
// advertised one. Its scheme follows the --tls flags.
func (c *cli) findCatalog(ctx context.Context) (string, error) {
	const how = "scan finds the catalog through the node at --addr; or set --catalog or MINK_CATALOG"
	st, err := c.client.GetStatus(ctx, &adminv1.GetStatusRequest{Node: c.node})
	if err != nil {
		return "", fmt.Errorf("%s: %w", how, err)
	}
	addr := st.GetAddrs()["catalog"]
	if _, port, err := net.SplitHostPort(addr); err == nil && c.node == "" {
		if host, _, err := net.SplitHostPort(c.addr); err == nil {
			addr = net.JoinHostPort(host, port)
		}
	}
	if addr == "" {
		nodes, err := c.client.ListNodes(ctx, &adminv1.ListNodesRequest{Node: c.node})
		if err != nil {
			return "", fmt.Errorf("%s: %w", how, err)
		}
		ns := nodes.GetNodes()
		sort.Slice(ns, func(i, j int) bool { return ns[i].GetNodeId() < ns[j].GetNodeId() })
		for _, n := range ns {
			if a := n.GetAddrs()["catalog"]; a != "" && !n.GetDraining() {
				addr = a
				break
			}
		}
	}
	if addr == "" {
		return "", usageError{fmt.Sprintf("no file server is live in the cluster of %s, so there is no catalog to read through: start one, or set --catalog or MINK_CATALOG", c.addr)}
	}
	if c.tls || c.tlsCAFile != "" || c.tlsServerName != "" {
		return "https://" + addr, nil
	}
	return "http://" + addr, nil
}

// catalogOptions carry --token and the --tls flags to the REST catalog, and the
// --tls-ca-file CA to iceberg-go's S3 reads. --tls-server-name is the node's, not theirs.
func (c *cli) catalogOptions(ctx context.Context) (context.Context, []rest.Option, error) {
	cfg, err := c.tlsConfig()
	if err != nil {
		return ctx, nil, err
	}
	ctx, opts := tablerows.CatalogOptions(ctx, c.token.Reveal(), cfg)
	return ctx, opts, nil
}

// tableIdent reads "namespace.table" (Iceberg's multi-level "a.b.table" too) or "table",
// which is in namespace "default".
func tableIdent(s string) (table.Identifier, error) {
	parts := strings.Split(s, ".")
	for _, p := range parts {
		if p == "" {
			return nil, usageError{fmt.Sprintf("scan: %q is not NAMESPACE.TABLE", s)}
		}
	}
	if len(parts) == 1 {
		parts = append([]string{"default"}, parts...)
	}
	return parts, nil
}

func splitColumns(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var cols []string
	seen := map[string]bool{}
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		if c == "" || seen[c] {
			return nil, usageError{fmt.Sprintf("--columns: empty or repeated column in %q", s)}
		}
		seen[c] = true
		cols = append(cols, c)
	}
	return cols, nil
}

// catalogError explains a catalog call that got no answer.
func (c *cli) catalogError(url string, err error) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne):
		return fmt.Errorf("catalog %s is unreachable (is a file server running? set --catalog or MINK_CATALOG): %w", url, err)
	case errors.Is(err, rest.ErrUnauthorized) && c.token == "":
		return fmt.Errorf("catalog %s checks credentials and none were given: set MINK_TOKEN or --token to a principal's secret: %w", url, err)
	case errors.Is(err, rest.ErrUnauthorized):
		return fmt.Errorf("catalog %s refused the token (%s): %w", url, c.sourceOf("token"), err)
	}
	return fmt.Errorf("catalog %s: %w", url, err)
}

// printRows prints up to limit rows (0: all) of recs, the columns named in order, as an
// aligned table ending in a row count, or as JSON lines (-o json). It returns the rows
// printed.
func printRows(w io.Writer, format string, schema *arrow.Schema, columns []string, recs iter.Seq2[arrow.RecordBatch, error], limit int64) (int64, error) {
	p := newRowPrinter(w, format, columns)
	if _, err := tablerows.Emit(schema, columns, recs, limit, p.row); err != nil {
		p.flush() // what was read before the failure is still worth seeing
		return p.n, err
	}
	return p.n, p.done()
}

// rowPrinter prints rows of cells: aligned columns under a header, or JSON lines.
type rowPrinter struct {
	w       io.Writer
	tw      *tabwriter.Writer // nil: JSON lines
	columns []string
	buf     []byte
	n       int64 // rows printed
}

func newRowPrinter(w io.Writer, format string, columns []string) *rowPrinter {
	p := &rowPrinter{w: w, columns: columns}
	if format != "json" {
		p.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(p.tw, strings.Join(columns, "\t"))
	}
	return p
}

func (p *rowPrinter) row(vals []any) error {
	if p.tw != nil {
		for j, v := range vals {
			if j > 0 {
				p.tw.Write([]byte{'\t'})
			}
			io.WriteString(p.tw, cellText(v))
		}
		p.tw.Write([]byte{'\n'})
	} else {
		p.buf = tablerows.AppendJSONRow(p.buf[:0], p.columns, vals)
		if _, err := p.w.Write(p.buf); err != nil {
			return err
		}
	}
	p.n++
	return nil
}

func (p *rowPrinter) flush() {
	if p.tw != nil {
		p.tw.Flush()
	}
}

// done ends the output: the aligned table's row count.
func (p *rowPrinter) done() error {
	if p.tw == nil {
		return nil
	}
	if err := p.tw.Flush(); err != nil {
		return err
	}
	rows := "rows"
	if p.n == 1 {
		rows = "row"
	}
	_, err := fmt.Fprintf(p.w, "(%d %s)\n", p.n, rows)
	return err
}

// maxCell is the widest a table cell gets; -o json prints values whole.
const maxCell = 64

// cellText renders a cell for the aligned table: NULL for null, text without quotes,
// and never a tab or newline, which would break the alignment.
func cellText(v any) string {
	s := tablerows.Text(v)
	if utf8.RuneCountInString(s) > maxCell {
		r := []rune(s)
		s = string(r[:maxCell-1]) + "…"
	}
	return s
}
