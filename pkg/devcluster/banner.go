package devcluster

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/minkhq/mink/pkg/flagenv"
)

// printBanner tells a newcomer where everything is, the credentials (da; nil with auth
// off) and the exact commands to try. The long snippets go to ConnectFile, which it names.
func printBanner(w io.Writer, c *Config, info RunInfo, partitions int, catalogErr error, da *DevAuth) {
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
	if u := c.ConsoleURL(); u != "" {
		who := "auth off"
		if da != nil {
			who = fmt.Sprintf("sign in as %s or %s (secrets below)", da.Admin.ID, da.Reader.ID)
		}
		fmt.Fprintf(tw, "  Console\t%s  in a browser (every node serves one, see Nodes); %s\n", u, who)
	}
	fmt.Fprintf(tw, "  Iceberg REST catalog\t%s\n", catalog)
	fmt.Fprintf(tw, "  S3 endpoint\t%s  bucket mink, path-style%s\n", info.S3URL, others(func(n Node) string { return "http://" + Addr(n.S3Port) }))
	fmt.Fprintf(tw, "  Postgres\t%s\n", flagenv.RedactURL(info.PostgresURL))
	registry := info.SchemaRegistryURL + "  (external)"
	if info.SchemaRegistryEmbedded {
		registry = fmt.Sprintf("%s  (embedded; schemas kept in %s)", info.SchemaRegistryURL, rel(filepath.Join(c.Dir, RegistryFile)))
	}
	fmt.Fprintf(tw, "  Schema Registry\t%s\n", registry)
	stream := func(what string, first int64) string {
		if c.Rate <= 0 {
			return "no demo " + what + " (--demo-rate 0)"
		}
		s := fmt.Sprintf("%g %s/s", c.Rate, what)
		if c.Events > 0 {
			s += fmt.Sprintf(", %d in all", c.Events)
		}
		return s + fmt.Sprintf(", ids from %d", first)
	}
	fmt.Fprintf(tw, "  Kafka\t%s  topic %s (%d partitions): JSON %s\n", strings.Join(info.KafkaBrokers, ","), info.Topic, partitions, stream("events", info.FirstEventID))
	avro := info.Avro
	if avro.Error == "" {
		fmt.Fprintf(tw, "  \t%s  topic %s (%d partitions): Avro %s, subject %s\n", strings.Repeat(" ", len(strings.Join(info.KafkaBrokers, ","))),
			avro.Topic, avro.Partitions, stream("orders", avro.FirstEventID), avro.Subject)
	}
	if info.TableError != "" {
		fmt.Fprintf(tw, "  Tables\t%s  NOT REGISTERED: %s\n", info.Table, info.TableError)
	} else {
		fmt.Fprintf(tw, "  Tables\t%s  (%s)\n", info.Table, info.TableState)
	}
	if avro.Error != "" {
		fmt.Fprintf(tw, "  \t%s  AVRO DEMO OFF: %s\n", avro.Table, avro.Error)
	} else {
		fmt.Fprintf(tw, "  \t%s  (%s)  %s\n", avro.Table, avro.TableState, evolution(c, avro))
	}
	if da != nil {
		how := "kept from an earlier run"
		if da.Created {
			how = "generated now, kept for the next runs"
		}
		fmt.Fprintf(tw, "  Auth\ton: %s (%s); --auth=false turns it off\n", rel(da.Path), how)
		fmt.Fprintf(tw, "  \t%-7s %s  %s\n", da.Admin.ID, da.Admin.Secret, scope(da.Admin))
		if da.Reader.ID != da.Admin.ID {
			fmt.Fprintf(tw, "  \t%-7s %s  %s\n", da.Reader.ID, da.Reader.Secret, scope(da.Reader))
		}
		fmt.Fprintf(tw, "  Engines\t%s\n", connectSummary(info.ConnectFile))
		fmt.Fprintf(tw, "  \tcatalog: OAuth2 credential=%s:%s; S3: vended per table load, or that id and secret as keys\n",
			da.Reader.ID, da.Reader.Secret)
	} else {
		fmt.Fprintf(tw, "  Auth\tOFF (--auth=false): anyone who reaches these ports may do anything\n")
		fmt.Fprintf(tw, "  Engines\t%s\n", connectSummary(info.ConnectFile))
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
		if n.ConsolePort != 0 {
			extra += "  console " + Addr(n.ConsolePort)
		}
		if n.Role == "fileserver" {
			extra += fmt.Sprintf("  catalog %s  s3 %s", Addr(n.CatalogPort), Addr(n.S3Port))
		}
		fmt.Fprintf(tw, "  %s\t%-13s gRPC %s%s  log %s\n", label, n.ID, Addr(n.GRPCPort), extra, rel(filepath.Join(c.Dir, "logs", n.ID+".log")))
	}
	tw.Flush()

	minkctl := rel(filepath.Join(c.BinDir, "minkctl"))
	grpcurl := grpcurlCommand(c)
	named := c.Nodes()[len(c.Nodes())-1].ID // the dialed node forwards the call to it
	asReader, header := "", ""
	if da != nil {
		fmt.Fprintf(w, "\nTry (minkctl reads MINK_ADDR, MINK_CATALOG and MINK_TOKEN; --addr, --catalog and --token override them):\n")
	} else {
		fmt.Fprintf(w, "\nTry (minkctl reads MINK_ADDR and MINK_CATALOG; --addr and --catalog override them):\n")
	}
	fmt.Fprintf(w, "  %s\n", exportLine(c, info, da))
	if da != nil && da.Reader.ID != da.Admin.ID {
		asReader = fmt.Sprintf(" --token %s   # as the %s", da.Reader.Secret, da.Reader.ID)
	}
	if da != nil {
		header = ` -H "authorization: Bearer $MINK_TOKEN"`
	}
	fmt.Fprintf(w, "  %s status\n", minkctl)
	fmt.Fprintf(w, "  %s nodes\n", minkctl)
	fmt.Fprintf(w, "  %s table describe %s\n", minkctl, c.Table)
	fmt.Fprintf(w, "  %s scan default.%s --limit 10%s\n", minkctl, c.Table, asReader)
	if info.Avro.Error == "" {
		fmt.Fprintf(w, "  %s table describe %s\n", minkctl, c.AvroTable)
		fmt.Fprintf(w, "  %s scan default.%s --limit 10   # the newest 10 rows; --from start: the oldest\n", minkctl, c.AvroTable)
		fmt.Fprintf(w, "  %s -plaintext -emit-defaults%s -d '{\"name\":\"%s\"}' %s mink.admin.v1.AdminService/DescribeTable   # schemaVersion: the table's; schemaId: Iceberg's\n",
			grpcurl, header, c.AvroTable, Addr(c.GRPCPort))
	}
	fmt.Fprintf(w, "  %s -plaintext -emit-defaults%s -d '{\"node\":\"%s\"}' %s mink.admin.v1.AdminService/GetStatus\n", grpcurl, header, named, Addr(c.GRPCPort))
	fmt.Fprintf(w, "\nYour own topic (README, \"Your own topic\"; the embedded broker also makes a topic on its first produce):\n")
	for _, l := range TourLines(minkctl, info.KafkaBrokers) {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintln(w)
}

// TourTopic is the topic and table the banner's tour makes.
const TourTopic = "clicks"

// TourLines are the banner's tour: a topic of one's own, records in it, a table of it
// and a scan, as the README's "Your own topic" has them.
func TourLines(minkctl string, brokers []string) []string {
	return []string{
		fmt.Sprintf("%s topic create %s --partitions 2", minkctl, TourTopic),
		fmt.Sprintf(`printf '%%s\n' '{"user":"ann","ms":120}' '{"user":"bob","ms":80}' | kcat -P -b %s -t %s   # or any producer`,
			strings.Join(brokers, ","), TourTopic),
		fmt.Sprintf("%s table create %s --column user:string --column ms:long", minkctl, TourTopic),
		fmt.Sprintf("%s scan default.%s --limit 10", minkctl, TourTopic),
	}
}

// exportLine sets minkctl's addresses and credential for this run: the first node, the
// first file server's catalog, and with auth on the admin's secret.
func exportLine(c *Config, info RunInfo, da *DevAuth) string {
	s := fmt.Sprintf("export MINK_ADDR=%s MINK_CATALOG=%s", Addr(c.GRPCPort), info.CatalogURL)
	if da != nil {
		s += fmt.Sprintf(" MINK_TOKEN=%s   # the %s's secret", da.Admin.Secret, da.Admin.ID)
	}
	return s
}

// grpcurlCommand is the grpcurl the banner names: make dev's own, when it installed one.
func grpcurlCommand(c *Config) string {
	if p := filepath.Join(c.BinDir, "grpcurl"); fileExists(p) {
		return rel(p)
	}
	return "grpcurl"
}

// evolution says which versions of its registry subject the Avro demo writes: the
// registry's versions and ids, not the table's schema version.
func evolution(c *Config, a AvroInfo) string {
	switch {
	case a.SchemaIDV2 != 0:
		return fmt.Sprintf("writes registry version 2 (registry id %d, with the field %s)", a.SchemaIDV2, AvroNewField)
	case a.EvolveAfter == 0:
		return fmt.Sprintf("writes registry version 1 (registry id %d)", a.SchemaIDV1)
	}
	s := fmt.Sprintf("registry version 1 (registry id %d); version 2 adds the column %s from order %d", a.SchemaIDV1, AvroNewField, a.EvolveAfter+1)
	if left := a.EvolveAfter + 1 - a.FirstEventID; c.Rate > 0 && left >= 0 && (c.Events == 0 || left < c.Events) {
		s += fmt.Sprintf(" (in about %.0fs)", float64(left)/c.Rate)
	}
	return s
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
