package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/tlsfiles/tlsfilestest"
	"github.com/minkhq/mink/test/cluster"
)

// TLS and hardening of issue 14 with real processes: nodes started with --tls-* flags,
// minkctl and grpcurl dialing them, iceberg-go (minkctl scan) reading over HTTPS, and
// floods of idle and slow connections against a file server. Helpers here are tls….

// tlsCluster is a cluster whose nodes serve TLS with certificates of one CA.
type tlsCluster struct {
	*cluster.Cluster
	ca     *tlsfilestest.CA
	caFile string // the CA certificate, for clients (minkctl --tls-ca-file)
	files  map[string]tlsfilestest.Files
	conns  map[string]*grpc.ClientConn
}

func newTLSCluster(t *testing.T) *tlsCluster {
	tc := &tlsCluster{Cluster: newCluster(t, 1500*time.Millisecond), ca: tlsfilestest.NewCA(t, "mink e2e ca"),
		files: map[string]tlsfilestest.Files{}, conns: map[string]*grpc.ClientConn{}}
	tc.caFile = filepath.Join(t.TempDir(), "ca.crt")
	tlsfilestest.WriteFile(t, tc.caFile, tc.ca.PEM)
	t.Cleanup(func() {
		for _, c := range tc.conns {
			c.Close()
		}
	})
	return tc
}

// tlsStart starts a node with its own certificate (for the loopback addresses it
// listens on) and the cluster's CA as --tls-client-ca-file.
func (tc *tlsCluster) tlsStart(role, id string, extra ...string) *cluster.Node {
	tc.T.Helper()
	files, _ := tc.ca.Write(tc.T, tc.T.TempDir(), id, tlsfilestest.Loopback...)
	tc.files[id] = files
	return tc.Start(role, id, append([]string{"--tls-cert-file", files.Cert, "--tls-key-file", files.Key,
		"--tls-client-ca-file", files.ClientCAs}, extra...)...)
}

// tlsFileServer starts a TLS file server and returns its catalog URL (https://).
func (tc *tlsCluster) tlsFileServer(id string, extra ...string) string {
	tc.T.Helper()
	tc.tlsStart("fileserver", id, append([]string{"--cache-bytes", "256MiB"}, extra...)...)
	addrs := tc.tlsAddrs(id, true)
	if !strings.HasPrefix(addrs["s3"], "https://") {
		tc.T.Errorf("%s advertises S3 endpoint %q, want https://", id, addrs["s3"])
	}
	return "https://" + addrs["catalog"]
}

// tlsAddrs waits until node id answers over TLS and returns its advertised addresses
// (with fileServer, once they include the catalog's and S3's).
func (tc *tlsCluster) tlsAddrs(id string, fileServer bool) map[string]string {
	tc.T.Helper()
	return waitFor(tc.T, 20*time.Second, id+" to answer over TLS", func() (map[string]string, bool) {
		st, err := tc.tlsClient(id).GetStatus(context.Background(), &adminv1.GetStatusRequest{})
		return st.GetAddrs(), err == nil && st.GetAddrs()["metrics"] != "" && (!fileServer || st.GetAddrs()["s3"] != "")
	})
}

// tlsClient is an admin client of node id over TLS, without a client certificate.
func (tc *tlsCluster) tlsClient(id string) adminv1.AdminServiceClient {
	tc.T.Helper()
	if tc.conns[id] == nil {
		conn, err := grpc.NewClient(tc.Member(id).Addr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: tc.ca.Pool()})))
		if err != nil {
			tc.T.Fatal(err)
		}
		tc.conns[id] = conn
	}
	return adminv1.NewAdminServiceClient(tc.conns[id])
}

// tlsHTTP is an HTTPS client that trusts the cluster's CA (and keeps no connection).
func (tc *tlsCluster) tlsHTTP() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: tc.ca.Pool()}}}
}

// tlsSerial is the serial of the certificate a new TLS connection to addr is shown.
func tlsSerial(t *testing.T, addr string, roots *x509.CertPool) (*big.Int, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

func hostPort(u string) string {
	u = strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
	host, _, _ := strings.Cut(u, "/")
	return host
}

// TestTLSCluster: four nodes with the TLS flags. minkctl with --tls-ca-file (and a token
// a node with auth checks) reaches every node, forwarded over TLS; without TLS, or
// trusting the wrong roots, it is refused. minkctl scan reads the table through each
// file server's catalog and S3 over HTTPS, the files the other owns forwarded between
// them over TLS. grpcurl -cacert works, -plaintext does not; a client certificate of
// another CA is refused, none is fine. The certificate of a file server is rotated by
// replacing its files: every listener serves the new one to new connections, no restart.
func TestTLSCluster(t *testing.T) {
	c := newTLSCluster(t)
	c.Kafka.CreateTopic("events", 4, nil)
	c.tlsStart("indexer", "idx-a")
	c.tlsStart("writer", "wr-1")
	cat1 := c.tlsFileServer("fs-1")
	cat2 := c.tlsFileServer("fs-2")
	fs1 := c.Node("fs-1").Process()
	a := c.Member("idx-a").Addr()
	c.tlsAddrs("idx-a", false)
	c.tlsAddrs("wr-1", false)

	tlsFlags := []string{"--addr", a, "--tls-ca-file", c.caFile}
	ok := func(args ...string) string {
		t.Helper()
		out, errOut, code := minkctl(t, nil, append(tlsFlags, args...)...)
		if code != 0 {
			t.Fatalf("minkctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}

	// Every node, each status forwarded by idx-a over TLS.
	out := ok("status", "--cluster")
	for _, w := range []string{"idx-a", "wr-1", "fs-1", "fs-2"} {
		if !strings.Contains(out, w) {
			t.Errorf("status --cluster over TLS does not show %s:\n%s", w, out)
		}
	}
	var st adminv1.GetStatusResponse
	if err := protojson.Unmarshal([]byte(ok("status", "--node", "fs-2", "-o", "json")), &st); err != nil || st.GetNodeId() != "fs-2" {
		t.Errorf("status --node fs-2 -o json, forwarded: %v %v", &st, err)
	}
	if s, err := c.tlsClient("fs-1").GetStatus(context.Background(), &adminv1.GetStatusRequest{Node: "wr-1"}); err != nil || s.GetNodeId() != "wr-1" {
		t.Errorf("GetStatus of wr-1 forwarded by fs-1 over TLS: %v %v", s, err)
	}
	// Refused: plaintext; the system's roots (they do not know the cluster's CA).
	for _, args := range [][]string{{"--addr", a, "status"}, {"--addr", a, "--tls", "status"}} {
		_, errOut, code := minkctl(t, nil, args...)
		t.Logf("minkctl %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errOut))
		if code != 1 || !strings.Contains(errOut, "Unavailable") {
			t.Errorf("minkctl %s against a TLS node: exit %d %s", strings.Join(args, " "), code, errOut)
		}
	}
	// A client certificate of another CA is refused (one of the cluster's CA, or none, is not).
	intruder := tlsfilestest.NewCA(t, "another ca").Issue(t, "intruder")
	conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: c.ca.Pool(),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &intruder.TLS, nil }})))
	if err != nil {
		t.Fatal(err)
	}
	_, err = adminv1.NewAdminServiceClient(conn).GetStatus(context.Background(), &adminv1.GetStatusRequest{})
	conn.Close()
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a client certificate of another CA: %v, want Unavailable", err)
	}
	if grpcurl != "" {
		out, code, msg := runGrpcurl(t, "-cacert", c.caFile, a, "list")
		if code != "" || !strings.Contains(out, "mink.admin.v1.AdminService") {
			t.Errorf("grpcurl -cacert list: %q %s %s", out, code, msg)
		}
		if _, code, msg := runGrpcurl(t, "-plaintext", a, "list"); code == "" && msg == "" {
			t.Errorf("grpcurl -plaintext against a TLS node answered")
		}
	}

	// A table, records in all four partitions, read back through each file server.
	ok("table", "create", "events", "--column", "id:long:required", "--column", "msg:string",
		"--property", "mink.range.max-age=200ms", "--property", "mink.commit.interval=200ms")
	prod := c.Kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const perPart = 25
	var recs []*kgo.Record
	for p := range int32(4) {
		for i := range perPart {
			id := int(p)*1000 + i
			recs = append(recs, &kgo.Record{Topic: "events", Partition: p, Value: fmt.Appendf(nil, `{"id":%d,"msg":"m%d"}`, id, id)})
		}
	}
	kafkatest.Produce(t, prod, recs...)
	for _, cat := range []string{cat1, cat2} {
		start := time.Now()
		got := waitFor(t, 30*time.Second, "every record to be scanned through "+cat, func() (string, bool) {
			out, _, code := minkctl(t, nil, append(tlsFlags, "scan", "default.events", "--catalog", cat, "--limit", "0", "-o", "json")...)
			return out, code == 0 && strings.Count(out, "\n") == 4*perPart
		})
		t.Logf("minkctl scan over HTTPS through %s: %d rows in %v", cat, strings.Count(got, "\n"), time.Since(start).Round(time.Millisecond))
	}
	var forwarded int64
	for _, id := range []string{"fs-1", "fs-2"} {
		s, err := c.tlsClient("idx-a").GetStatus(context.Background(), &adminv1.GetStatusRequest{Node: id})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(s.GetFigures()["forwarded_reads"], 10, 64)
		t.Logf("%s forwarded %d reads over TLS", id, n)
		forwarded += n
	}
	if forwarded == 0 {
		t.Error("no read was forwarded between the file servers (each scanned every file)")
	}

	// The catalog and metrics over HTTPS; plaintext to them is answered 400 by TLS.
	hc := c.tlsHTTP()
	metrics := c.tlsAddrs("fs-1", true)["metrics"]
	for _, u := range []string{cat1 + "/v1/config", "https://" + metrics + "/metrics"} {
		resp, err := hc.Get(u)
		if err != nil {
			t.Errorf("GET %s: %v", u, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d", u, resp.StatusCode)
		}
		resp, err = (&http.Client{Timeout: 5 * time.Second}).Get(strings.Replace(u, "https://", "http://", 1))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("plaintext GET %s: %d", u, resp.StatusCode)
			}
		}
	}

	// Rotation: fs-1's files replaced; new connections to each of its listeners see the
	// new certificate, and the process is the same one.
	next := c.ca.Issue(t, "fs-1", tlsfilestest.Loopback...)
	c.files["fs-1"].Replace(t, next)
	rotated := time.Now()
	listeners := map[string]string{"gRPC": c.Member("fs-1").Addr(), "catalog": hostPort(cat1), "S3": hostPort(c.tlsAddrs("fs-1", true)["s3"]), "metrics": metrics}
	for name, addr := range listeners {
		waitFor(t, 10*time.Second, "fs-1's "+name+" listener to serve the new certificate", func() (string, bool) {
			s, err := tlsSerial(t, addr, c.ca.Pool())
			if err != nil {
				return err.Error(), false
			}
			return s.String(), s.Cmp(next.Leaf.SerialNumber) == 0
		})
	}
	t.Logf("every listener of fs-1 served the rotated certificate %v after its files changed", time.Since(rotated).Round(time.Millisecond))
	select {
	case <-fs1.Done():
		t.Fatal("fs-1 exited during the rotation")
	default:
	}
	if out, errOut, code := minkctl(t, nil, "--addr", c.Member("fs-1").Addr(), "--tls-ca-file", c.caFile, "scan", "events", "--catalog", cat1, "--limit", "0"); code != 0 || !strings.Contains(out, "(100 rows)") {
		t.Errorf("after the rotation, minkctl through fs-1: exit %d: %s %s", code, out, errOut)
	}
}

// TestTLSMinkctlToken: minkctl --token against a TLS node with auth on: the token is
// what the node checks (a principal's secret is a static bearer token).
func TestTLSMinkctlToken(t *testing.T) {
	c := newTLSCluster(t)
	const secret = "tls-e2e-admin-secret-0123456789"
	cfg, err := json.Marshal(map[string]any{"cluster_secret": "tls-e2e-cluster-secret-0123456789abcdef",
		"principals": []any{map[string]any{"id": "ops", "secret": secret, "role": "admin"}}})
	if err != nil {
		t.Fatal(err)
	}
	authFile := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(authFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	c.tlsStart("writer", "wr-1", "--auth-config", authFile)
	a := c.Member("wr-1").Addr()
	waitFor(t, 20*time.Second, "wr-1 to answer with the token", func() (string, bool) {
		out, errOut, code := minkctl(t, []string{"MINK_TOKEN=" + secret}, "--addr", a, "--tls-ca-file", c.caFile, "status")
		return out + errOut, code == 0 && strings.Contains(out, "wr-1")
	})
	_, errOut, code := minkctl(t, nil, "--addr", a, "--tls-ca-file", c.caFile, "status")
	t.Logf("without --token: exit %d: %s", code, strings.TrimSpace(errOut))
	if code != 1 || !strings.Contains(errOut, "Unauthenticated") {
		t.Errorf("without --token: exit %d %s, want Unauthenticated", code, errOut)
	}
	_, errOut, code = minkctl(t, nil, "--addr", a, "--tls-ca-file", c.caFile, "--token", "wrong-token-0123456789", "status")
	if code != 1 || !strings.Contains(errOut, "Unauthenticated") || strings.Contains(errOut, "wrong-token") {
		t.Errorf("a wrong --token: exit %d %s, want Unauthenticated without the token", code, errOut)
	}
}

// TestTLSCARotation: the cluster's CA rotated from A to B while the processes run, as an
// operator does it. wr-1's bundle becomes A+B: a client certificate of B is accepted, and
// wr-1 reaches a new node whose certificate is of B; then B alone: a client certificate of
// A is refused, the node of B still reached, and wr-1 is the process it was.
func TestTLSCARotation(t *testing.T) {
	c := newTLSCluster(t)
	b := tlsfilestest.NewCA(t, "mink e2e ca b")
	both := append(append([]byte(nil), c.ca.PEM...), b.PEM...)
	c.tlsStart("writer", "wr-1")
	wr1 := c.Node("wr-1").Process()
	c.tlsAddrs("wr-1", false)
	a := c.Member("wr-1").Addr()
	// call is GetStatus of node (wr-1's own: "") through wr-1, on a new connection
	// presenting cert (nil: none).
	call := func(node string, cert *tls.Certificate) error {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: c.ca.Pool(),
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if cert == nil {
					return &tls.Certificate{}, nil
				}
				return cert, nil
			}})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = adminv1.NewAdminServiceClient(conn).GetStatus(ctx, &adminv1.GetStatusRequest{Node: node})
		return err
	}
	ofA, ofB := c.ca.Issue(t, "ops a"), b.Issue(t, "ops b")
	if err := call("", &ofA.TLS); err != nil {
		t.Fatalf("a client certificate of A, the bundle A: %v", err)
	}
	if err := call("", &ofB.TLS); status.Code(err) != codes.Unavailable {
		t.Fatalf("a client certificate of B, the bundle A: %v, want Unavailable", err)
	}

	tlsfilestest.WriteFile(t, c.files["wr-1"].ClientCAs, both)
	changed := time.Now()
	waitFor(t, 10*time.Second, "wr-1 to accept a client certificate of B", func() (error, bool) {
		err := call("", &ofB.TLS)
		return err, err == nil
	})
	t.Logf("a client certificate of B accepted %v after wr-1's bundle became A+B", time.Since(changed).Round(time.Millisecond))
	files, _ := b.Write(t, t.TempDir(), "wr-2", tlsfilestest.Loopback...)
	tlsfilestest.WriteFile(t, files.ClientCAs, both)
	c.Start("writer", "wr-2", "--tls-cert-file", files.Cert, "--tls-key-file", files.Key, "--tls-client-ca-file", files.ClientCAs)
	waitFor(t, 30*time.Second, "wr-1 to forward GetStatus to wr-2 (a certificate of B)", func() (error, bool) {
		err := call("wr-2", nil)
		return err, err == nil
	})

	tlsfilestest.WriteFile(t, c.files["wr-1"].ClientCAs, b.PEM)
	changed = time.Now()
	waitFor(t, 10*time.Second, "wr-1 to refuse a client certificate of A", func() (error, bool) {
		err := call("", &ofA.TLS)
		return err, status.Code(err) == codes.Unavailable
	})
	t.Logf("a client certificate of A refused %v after A left wr-1's bundle", time.Since(changed).Round(time.Millisecond))
	for name, err := range map[string]error{"a client certificate of B": call("", &ofB.TLS),
		"no client certificate": call("", nil), "forwarded to wr-2": call("wr-2", nil)} {
		if err != nil {
			t.Errorf("the bundle B, %s: %v", name, err)
		}
	}
	select {
	case <-wr1.Done():
		t.Fatal("wr-1 exited during the rotation")
	default:
	}
}

// tlsRSS is a process's resident set size, from /proc/<pid>/status.
func tlsRSS(t *testing.T, p *cluster.Process) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/<pid>/status")
	return 0
}

// tlsHoldIdle opens n connections to addr that send nothing, closed when the test ends.
func tlsHoldIdle(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("idle connection %d to %s: %v", len(conns), addr, err)
		}
		conns = append(conns, c)
	}
	return conns
}

// tlsCut waits until the server has closed every one of conns (or deadline) and returns
// how many it closed and when the last was, from since.
func tlsCut(conns []net.Conn, since time.Time, deadline time.Duration) (int, time.Duration) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var n int
	var last time.Duration
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(since.Add(deadline))
			if _, err := io.Copy(io.Discard, c); err == nil { // EOF: the server closed it
				mu.Lock()
				n, last = n+1, max(last, time.Since(since))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n, last
}

// TestConnectionFlood: a file server (plaintext, the default limits) while 2,000 idle
// connections are held on its S3 port, 500 on its gRPC port and a slowloris client
// trickles a header to its catalog: it keeps answering normal clients on every listener
// at once, its RSS grows by a bounded amount, and it cuts the slowloris and every idle
// connection after the 10s header (and gRPC handshake) timeout. A second one, capped at
// 64 connections per listener, makes the 65th S3 client wait — its gRPC and catalog
// still answer — and serves it when a slot frees.
func TestConnectionFlood(t *testing.T) {
	c := newCluster(t, 1500*time.Millisecond)
	const headerTimeout = 10 * time.Second // httplimit.DefaultReadHeaderTimeout; gRPC's handshake bound too
	catalog := ctlFileServer(t, c, "fs-1")
	capCatalog := ctlFileServer(t, c, "fs-cap", "--max-connections", "64")
	fs1 := c.Node("fs-1").Process()
	st, err := c.Member("fs-1").Admin().GetStatus(context.Background(), &adminv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s3 := st.GetAddrs()["s3"]
	capSt, err := c.Member("fs-cap").Admin().GetStatus(context.Background(), &adminv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	capS3 := capSt.GetAddrs()["s3"]
	plain := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	// answered is how long a normal request took; an S3 GET of a key that is no file is
	// a 404 of the S3 API: a whole round through its handler.
	answered := func(url string, want int) (time.Duration, error) {
		start := time.Now()
		resp, err := plain.Get(url)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			return 0, errors.New(resp.Status)
		}
		return time.Since(start), nil
	}
	missing := "/mink/default/nope/data/_kafka_partition=0/00000000000000000000-00000000000000000001-0000000000000000.parquet"
	grpcOK := func(id string) (time.Duration, error) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := grpc.NewClient(c.Member(id).Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		_, err = adminv1.NewAdminServiceClient(conn).GetStatus(ctx, &adminv1.GetStatusRequest{})
		return time.Since(start), err
	}
	// Warm every path once.
	if _, err := answered(catalog+"/v1/config", 200); err != nil {
		t.Fatal(err)
	}
	if _, err := answered(s3+missing, 404); err != nil {
		t.Fatal(err)
	}
	rssBefore := tlsRSS(t, fs1)

	opened := time.Now()
	idleS3 := tlsHoldIdle(t, hostPort(s3), 2000)
	idleGRPC := tlsHoldIdle(t, c.Member("fs-1").Addr(), 500)
	capIdle := tlsHoldIdle(t, hostPort(capS3), 64)
	t.Logf("2000 idle S3, 500 idle gRPC and 64 idle connections to the capped node opened in %v", time.Since(opened).Round(time.Millisecond))

	slow, err := net.Dial("tcp", hostPort(catalog))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	slowStart := time.Now()
	io.WriteString(slow, "GET /v1/config HTTP/1.1\r\nHost: x\r\n")
	slowCut := make(chan time.Duration, 1)
	go func() {
		slow.SetReadDeadline(time.Now().Add(30 * time.Second))
		io.Copy(io.Discard, slow)
		slowCut <- time.Since(slowStart)
	}()
	stopTrickle := make(chan struct{})
	defer close(stopTrickle)
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopTrickle:
				return
			case <-tick.C:
				slow.Write([]byte("X")) // another byte of a header line that never ends
			}
		}
	}()

	// Normal clients of every listener, during the flood: answered at once.
	for name, check := range map[string]func() (time.Duration, error){
		"S3 GET":         func() (time.Duration, error) { return answered(s3+missing, 404) },
		"catalog GET":    func() (time.Duration, error) { return answered(catalog+"/v1/config", 200) },
		"gRPC GetStatus": func() (time.Duration, error) { return grpcOK("fs-1") },
	} {
		d, err := check()
		t.Logf("%s during the flood: %v %v", name, d.Round(time.Millisecond), err)
		if err != nil || d > 2*time.Second {
			t.Errorf("%s during the flood: %v after %v", name, err, d)
		}
	}
	rssFlood := tlsRSS(t, fs1)
	t.Logf("fs-1 RSS %d MiB before, %d MiB with 2,500 idle connections (+%d KiB)", rssBefore>>20, rssFlood>>20, (rssFlood-rssBefore)>>10)
	if rssFlood-rssBefore > 150<<20 {
		t.Errorf("fs-1's RSS grew by %d MiB for 2,500 idle connections", (rssFlood-rssBefore)>>20)
	}

	// The capped node: its 65th S3 client waits, its other listeners answer.
	waited := make(chan error, 1)
	waitStart := time.Now()
	go func() { _, err := answered(capS3+missing, 404); waited <- err }()
	select {
	case err := <-waited:
		t.Errorf("the capped node served a 65th connection at once (%v)", err)
	case <-time.After(time.Second):
	}
	if _, err := answered(capCatalog+"/v1/config", 200); err != nil {
		t.Errorf("the capped node's catalog while its S3 is full: %v", err)
	}
	if _, err := grpcOK("fs-cap"); err != nil {
		t.Errorf("the capped node's gRPC while its S3 is full: %v", err)
	}
	// A slot frees when a client leaves.
	capIdle[0].Close()
	if err := <-waited; err != nil {
		t.Errorf("the client beyond the cap: %v", err)
	}
	t.Logf("the 65th S3 client of the capped node was served after %v, when a slot freed", time.Since(waitStart).Round(time.Millisecond))

	d := <-slowCut
	t.Logf("slowloris cut after %v", d.Round(time.Millisecond))
	if d < headerTimeout-time.Second || d > headerTimeout+3*time.Second {
		t.Errorf("slowloris cut after %v, want about %v", d, headerTimeout)
	}
	cut, last := tlsCut(append(idleS3, idleGRPC...), opened, headerTimeout+10*time.Second)
	t.Logf("%d of 2500 idle connections cut by fs-1, the last %v after the flood began", cut, last.Round(time.Millisecond))
	if cut != 2500 || last > headerTimeout+5*time.Second {
		t.Errorf("%d of 2500 idle connections cut, the last after %v", cut, last)
	}
	t.Logf("fs-1 RSS %d MiB after the flood", tlsRSS(t, fs1)>>20)
	if _, err := grpcOK("fs-1"); err != nil {
		t.Errorf("after the flood: %v", err)
	}
	select {
	case <-fs1.Done():
		t.Fatal("fs-1 exited")
	default:
	}
}
