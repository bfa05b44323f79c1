package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
)

func statusFlags(fs *flag.FlagSet) any {
	return fs.Bool("cluster", false, "every live node, its leases and figures, and every table's per-partition lag, at a glance")
}

// overview is `minkctl status --cluster`: each live node's own status (asked through the
// dialed node, which forwards) and each table's index against Kafka.
func (c *cli) overview(ctx context.Context) error {
	nodes, err := c.client.ListNodes(ctx, &adminv1.ListNodesRequest{})
	if err != nil {
		return err
	}
	var statuses []*adminv1.GetStatusResponse
	var unreachable []string
	for _, n := range nodes.GetNodes() {
		st, err := c.client.GetStatus(ctx, &adminv1.GetStatusRequest{Node: n.GetNodeId()})
		if err != nil {
			unreachable = append(unreachable, fmt.Sprintf("%s (%v)", n.GetNodeId(), err))
			continue
		}
		statuses = append(statuses, st)
	}
	tables, err := c.client.ListTables(ctx, &adminv1.ListTablesRequest{})
	if err != nil {
		return err
	}
	var described []*adminv1.DescribeTableResponse
	for _, t := range tables.GetTables() {
		d, err := c.client.DescribeTable(ctx, &adminv1.DescribeTableRequest{Namespace: t.GetNamespace(), Name: t.GetName()})
		if err != nil {
			return err
		}
		described = append(described, d)
	}
	if c.output == "json" {
		// One JSON object per line: node statuses, then tables.
		for _, m := range append(asMessages(statuses), asMessages(described)...) {
			b, err := protojson.Marshal(m)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "%s\n", b)
		}
		return nil
	}
	return c.print(nil, func(w io.Writer) { printOverview(w, statuses, unreachable, described) })
}

func asMessages[T proto.Message](ms []T) []proto.Message {
	out := make([]proto.Message, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// overviewFigures are the figures worth a glance, by role.
var overviewFigures = []string{"partition_leases", "max_partitions", "partitions_paused", "writer_leases", "cache_hit_rate", "cache_files", "cache_bytes", "builds", "forwarded_reads", "live_loads"}

func printOverview(w io.Writer, statuses []*adminv1.GetStatusResponse, unreachable []string, tables []*adminv1.DescribeTableResponse) {
	fmt.Fprintln(w, "NODE\tROLES\tACTING\tDRAINING\tPARTITION LEASES\tWRITER LEASES\tLAST ERROR\tFIGURES")
	for _, s := range statuses {
		var parts, writers int
		for _, l := range s.GetLeases() {
			if l.GetKind() == adminv1.LeaseKind_LEASE_KIND_WRITER {
				writers++
			} else {
				parts++
			}
		}
		var figs []string
		for _, k := range overviewFigures {
			if v, ok := s.GetFigures()[k]; ok {
				figs = append(figs, k+"="+v)
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%t\t%t\t%d\t%d\t%s\t%s\n", s.GetNodeId(), roles(s.GetRoles()), s.GetActing(), s.GetDraining(),
			parts, writers, dash(s.GetLastError()), dash(strings.Join(figs, " ")))
	}
	for _, u := range unreachable {
		fmt.Fprintf(w, "%s\t?\t?\t?\t?\t?\tunreachable\t-\n", u)
	}
	if len(tables) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "TABLE\tPARTITION\tHOLDER\tEPOCH\tINDEXED END\tHIGH WATERMARK\tLAG\tRANGES\tLAST RANGE\tINDEXING")
	sort.Slice(tables, func(i, j int) bool { return fullName(tables[i].GetTable()) < fullName(tables[j].GetTable()) })
	for _, d := range tables {
		var total int64
		for _, p := range d.GetPartitions() {
			indexing := "ok"
			if e := p.GetIndexError(); e != "" {
				indexing = "paused: " + e
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", fullName(d.GetTable()), p.GetPartition(), dash(p.GetHolder()),
				p.GetEpoch(), p.GetIndexedEndOffset(), p.GetHighWatermark(), lag(p.GetLagRecords()), p.GetRangeCount(), ts(p.GetLastRangeTime()), indexing)
			if p.GetLagRecords() > 0 {
				total += p.GetLagRecords()
			}
		}
		fmt.Fprintf(w, "%s\tTOTAL\t\t\t\t\t%d\t\t\t\n", fullName(d.GetTable()), total)
	}
}

func fullName(t *adminv1.Table) string { return t.GetNamespace() + "." + t.GetName() }

func lag(n int64) string {
	if n < 0 {
		return "?" // Kafka did not answer
	}
	return fmt.Sprint(n)
}
