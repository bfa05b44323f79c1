package devcluster

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// printBanner tells a newcomer where everything is and the exact commands to try.
func printBanner(w io.Writer, c *Config, info RunInfo, partitions int, catalogErr error) {
	fmt.Fprintf(w, "\nMink dev cluster is up. Data and logs: %s. Ctrl-C stops it; make dev again picks up where it left off.\n\n", rel(c.Dir))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var fs []Node
	for _, n := range c.Nodes() {
		if n.Role == "fileserver" {
			fs = append(fs, n)
		}
	}
	others := func(url func(Node) string) string {
		var out []string
		for _, n := range fs[1:] {
			out = append(out, n.ID+" "+url(n))
		}
		if len(out) == 0 {
			return ""
		}
		return "  (also " + strings.Join(out, ", ") + ")"
	}
	catalog := info.CatalogURL + others(func(n Node) string { return "http://" + Addr(n.CatalogPort) })
	if catalogErr != nil {
		catalog += "  WARNING: not answering yet: " + catalogErr.Error()
	}
	fmt.Fprintf(tw, "  Iceberg REST catalog\t%s\n", catalog)
	fmt.Fprintf(tw, "  S3 endpoint\t%s  bucket mink, path-style%s\n", info.S3URL, others(func(n Node) string { return "http://" + Addr(n.S3Port) }))
	fmt.Fprintf(tw, "  Postgres\t%s\n", redact(info.PostgresURL))
	stream := "no demo events (--demo-rate 0)"
	if c.Rate > 0 {
		stream = fmt.Sprintf("%g events/s", c.Rate)
		if c.Events > 0 {
			stream += fmt.Sprintf(", %d in all", c.Events)
		}
		stream += fmt.Sprintf(", ids from %d", info.FirstEventID)
	}
	fmt.Fprintf(tw, "  Kafka\t%s  topic %s (%d partitions): %s\n", strings.Join(info.KafkaBrokers, ","), info.Topic, partitions, stream)
	if info.TableError != "" {
		fmt.Fprintf(tw, "  Table\t%s  NOT REGISTERED: %s\n", info.Table, info.TableError)
	} else {
		fmt.Fprintf(tw, "  Table\t%s  (%s)\n", info.Table, info.TableState)
	}
	for i, n := range c.Nodes() {
		label := ""
		if i == 0 {
			label = "Nodes"
		}
		extra := ""
		if n.MetricsPort != 0 {
			extra = "  metrics " + Addr(n.MetricsPort)
		}
		if n.Role == "fileserver" {
			extra += fmt.Sprintf("  catalog %s  s3 %s", Addr(n.CatalogPort), Addr(n.S3Port))
		}
		fmt.Fprintf(tw, "  %s\t%-13s gRPC %s%s  log %s\n", label, n.ID, Addr(n.GRPCPort), extra, rel(filepath.Join(c.Dir, "logs", n.ID+".log")))
	}
	tw.Flush()

	minkctl := rel(filepath.Join(c.BinDir, "minkctl"))
	addr := ""
	if c.GRPCPort != Defaults.GRPCPort {
		addr = " --addr " + Addr(c.GRPCPort)
	}
	catalogFlag := ""
	if c.CatalogPort != Defaults.CatalogPort {
		catalogFlag = " --catalog " + info.CatalogURL
	}
	grpcurl := "grpcurl"
	if p := filepath.Join(c.BinDir, "grpcurl"); fileExists(p) {
		grpcurl = rel(p)
	}
	named := c.Nodes()[len(c.Nodes())-1].ID // the dialed node forwards the call to it
	fmt.Fprintf(w, "\nTry:\n")
	fmt.Fprintf(w, "  %s%s status\n", minkctl, addr)
	fmt.Fprintf(w, "  %s%s nodes\n", minkctl, addr)
	fmt.Fprintf(w, "  %s%s table describe %s\n", minkctl, addr, c.Table)
	fmt.Fprintf(w, "  %s scan default.%s --limit 10%s\n", minkctl, c.Table, catalogFlag)
	fmt.Fprintf(w, "  %s -plaintext -d '{\"node\":\"%s\"}' %s mink.admin.v1.AdminService/GetStatus\n", grpcurl, named, Addr(c.GRPCPort))
	fmt.Fprintln(w)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
