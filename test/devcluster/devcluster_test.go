// Package devcluster_test runs `make dev`'s launcher (cmd/minkdev) as a real process, with
// short durations and its own ports and folder, and checks what a newcomer is promised:
// the cluster comes up, the demo stream becomes a table that `minkctl scan` reads with
// every record exactly once, Ctrl-C leaves nothing behind, and a second run picks up the
// same data.
package devcluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/devcluster"
	"github.com/minkhq/mink/pkg/pgtest"
)

var binDir string // minkdev, minkctl and the three roles, built once

func TestMain(m *testing.M) {
	os.Exit(func() int {
		var err error
		binDir, err = os.MkdirTemp("", "minkdev-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(binDir)
		if err := build(binDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

func build(dir string) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	for !fileExists(filepath.Join(root, "go.mod")) {
		if filepath.Dir(root) == root {
			return errors.New("no go.mod above the test")
		}
		root = filepath.Dir(root)
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gobin, "build", "-o", dir+string(filepath.Separator),
		"./cmd/minkdev", "./cmd/minkctl", "./services/indexer", "./services/writer", "./services/fileserver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	for _, role := range []string{"indexer", "writer", "fileserver"} {
		if err := os.Rename(filepath.Join(dir, role), filepath.Join(dir, "mink-"+role)); err != nil {
			return err
		}
	}
	return nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Durations short enough for a test, long enough for a loaded machine.
const (
	readyTimeout = 45 * time.Second // minkdev: initdb, start, health, topic, table
	kafkaTimeout = 20 * time.Second // the demo events are all in Kafka
	scanTimeout  = 45 * time.Second // every record is a row in the table
	stopTimeout  = 40 * time.Second // Ctrl-C to exit
	catalogGrace = 10 * time.Second // a healthy file server's catalog refusing connections
)

func TestMakeDev(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole cluster twice")
	}
	if _, err := pgtest.BinDir(); err != nil {
		t.Fatalf("the launcher starts a private PostgreSQL: %v (make test installs it)", err)
	}
	// Not t.TempDir: its folders are private (0700), and Postgres runs as the postgres
	// user when the test runs as root.
	dir, err := os.MkdirTemp("", "minkdev-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil { // as /proc shows it
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	base := freePortBlock(t, 11)
	args := []string{
		"--dir", dir, "--bin-dir", binDir,
		"--postgres-port", strconv.Itoa(base), "--kafka-port", strconv.Itoa(base + 1),
		"--grpc-port", strconv.Itoa(base + 2), "--catalog-port", strconv.Itoa(base + 7), "--s3-port", strconv.Itoa(base + 9),
		"--metrics-port", "0", "--lease-ttl", "2s", "--shutdown-timeout", "5s", "--ready-timeout", "30s",
		"--demo-rate", "500", "--range-max-age", "1s", "--commit-interval", "1s",
	}

	// First run: a fresh cluster, 300 events.
	const first, second = 300, 120
	m := startMinkdev(t, append(args, "--demo-events", strconv.Itoa(first)))
	info := m.waitReady(t)
	if info.TableError != "" {
		t.Fatalf("step: register the demo table through the admin API: %s", info.TableError)
	}
	if info.TableState != "created" || info.FirstEventID != 1 {
		t.Errorf("first run: table %q, first event id %d; want created, 1", info.TableState, info.FirstEventID)
	}
	// The leftover check after the stop must be able to see this run's processes at all.
	if seen := procsUnder(dir); len(seen) < len(info.Processes)+1 {
		t.Fatalf("procsUnder sees %d processes of the running cluster, want at least the roles and Postgres:\n%s",
			len(seen), strings.Join(seen, "\n"))
	}
	want := waitProduced(t, info, first)
	m.waitScan(t, info, want)
	m.stop(t)
	checkNothingLeft(t, dir, info)

	// Second run on the same folder: the data is kept, the table reused, the ids go on.
	m = startMinkdev(t, append(args, "--demo-events", strconv.Itoa(second)))
	info = m.waitReady(t)
	if info.TableError != "" {
		t.Fatalf("second run: step: register the demo table: %s", info.TableError)
	}
	if info.TableState != "registered in an earlier run" || info.FirstEventID != first+1 {
		t.Errorf("second run: table %q, first event id %d; want it registered in an earlier run and ids from %d",
			info.TableState, info.FirstEventID, first+1)
	}
	want = waitProduced(t, info, first+second)
	m.waitScan(t, info, want)
	m.stop(t)
	checkNothingLeft(t, dir, info)
}

// freePortBlock finds n consecutive free loopback ports below the ephemeral range, so no
// outgoing connection takes one between the probe and the launcher's bind.
func freePortBlock(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base := 20000 + rand.IntN(12000)
		if portsFree(base, n) {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports found", n)
	return 0
}

func portsFree(base, n int) bool {
	for p := base; p < base+n; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// minkdev is one run of the launcher.
type minkdev struct {
	dir  string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

func startMinkdev(t *testing.T, args []string) *minkdev {
	t.Helper()
	m := &minkdev{out: &syncBuffer{}, done: make(chan struct{})}
	for i, a := range args {
		if a == "--dir" {
			m.dir = args[i+1]
		}
	}
	m.cmd = exec.Command(filepath.Join(binDir, "minkdev"), args...)
	m.cmd.Env = cleanEnv()
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.err = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("minkdev output:\n%s", m.out.String())
			m.logTails(t)
		}
		m.kill(t)
	})
	return m
}

// cleanEnv drops MINK_* variables: a developer's MINK_POSTGRES_URL must not point the
// test at their database.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINK_") {
			env = append(env, kv)
		}
	}
	return env
}

func (m *minkdev) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// waitReady waits for the launcher's run file, which it writes once the roles are
// healthy, the table is registered and the demo stream has started.
func (m *minkdev) waitReady(t *testing.T) devcluster.RunInfo {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		info, err := devcluster.ReadRunInfo(m.dir)
		if err == nil && info.LauncherPid == m.cmd.Process.Pid {
			return info
		}
		if m.exited() {
			t.Fatalf("step: start the cluster: minkdev exited (%v) before it was ready", m.err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("step: start the cluster: not ready within %v", readyTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop is Ctrl-C: one SIGINT, then a clean exit.
func (m *minkdev) stop(t *testing.T) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.done:
	case <-time.After(stopTimeout):
		t.Fatalf("step: stop: minkdev did not exit within %v of SIGINT", stopTimeout)
	}
	if m.err != nil {
		t.Fatalf("step: stop: minkdev exited with %v", m.err)
	}
	for _, want := range []string{"roles stopped", "kafka stopped", "postgres stopped"} {
		if !strings.Contains(m.out.String(), want) {
			t.Errorf("step: stop: minkdev did not say %q", want)
		}
	}
}

// kill is the cleanup of a failed test: nothing may outlive it, Postgres included.
func (m *minkdev) kill(t *testing.T) {
	if m.exited() {
		return
	}
	m.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-m.done:
		return
	case <-time.After(stopTimeout):
	}
	info, _ := devcluster.ReadRunInfo(m.dir)
	m.cmd.Process.Kill()
	<-m.done
	for _, p := range info.Processes {
		syscall.Kill(-p.Pid, syscall.SIGKILL)
	}
	if info.PostgresPid > 0 {
		syscall.Kill(info.PostgresPid, syscall.SIGQUIT) // immediate shutdown: takes its backends along
	}
	t.Errorf("minkdev did not stop on SIGINT: killed it and its processes")
}

func (m *minkdev) logTails(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join(m.dir, "logs", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		t.Logf("last lines of %s:\n%s", l, strings.Join(lines, "\n"))
	}
}

type position struct {
	partition int32
	offset    int64
}

// waitProduced waits until the topic holds total events, then reads them all back: the
// record at each (partition, offset) and the event id it carries.
func waitProduced(t *testing.T, info devcluster.RunInfo, total int) map[position]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(info.KafkaBrokers...), kgo.ConsumeTopics(info.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	for {
		ends, err := adm.ListEndOffsets(ctx, info.Topic)
		var sum int64
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		}
		if sum == int64(total) {
			break
		}
		if sum > int64(total) {
			t.Fatalf("step: produce: the topic holds %d records, want %d", sum, total)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("step: produce: the topic holds %d records after %v, want %d (err %v)", sum, kafkaTimeout, total, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	want := map[position]int64{}
	ids := map[int64]bool{}
	for len(want) < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("step: read the topic back: %d of %d records read", len(want), total)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var e struct{ ID int64 }
			if err := json.Unmarshal(r.Value, &e); err != nil {
				t.Fatalf("record %d/%d: %v", r.Partition, r.Offset, err)
			}
			if ids[e.ID] {
				t.Fatalf("event id %d was produced twice", e.ID)
			}
			ids[e.ID] = true
			want[position{r.Partition, r.Offset}] = e.ID
		})
	}
	for id := int64(1); id <= int64(total); id++ {
		if !ids[id] {
			t.Fatalf("step: produce: event id %d is not in the topic (ids must run 1..%d across runs)", id, total)
		}
	}
	return want
}

// waitScan runs `minkctl scan` until the table holds exactly the records of want: every
// (partition, offset) once with its event id. A duplicate or a row Kafka never had fails
// at once (no snapshot may ever show one); missing rows are waited for.
func (m *minkdev) waitScan(t *testing.T, info devcluster.RunInfo, want map[position]int64) {
	t.Helper()
	deadline := time.Now().Add(scanTimeout)
	var last string
	var refusedSince time.Time // the catalog refuses connections since
	for {
		rows, err := scan(info)
		switch {
		case err == nil || !strings.Contains(err.Error(), "is unreachable"):
			refusedSince = time.Time{}
		case refusedSince.IsZero():
			refusedSince = time.Now()
		case time.Since(refusedSince) > catalogGrace:
			// The file servers are healthy, so a closed catalog port is no slow start.
			t.Fatalf("step: scan: the file servers are healthy but their Iceberg REST catalog (%s) has refused connections for %v: %v",
				info.CatalogURL, catalogGrace, err)
		}
		if err == nil {
			seen := map[position]bool{}
			for _, r := range rows {
				p := position{r.Partition, r.Offset}
				id, ok := want[p]
				switch {
				case seen[p]:
					t.Fatalf("step: scan: record %d/%d is two rows", p.partition, p.offset)
				case !ok:
					t.Fatalf("step: scan: row %+v is no record in Kafka", r)
				case r.ID == nil || *r.ID != id:
					t.Fatalf("step: scan: row %d/%d has id %v, Kafka has %d", p.partition, p.offset, r.ID, id)
				}
				seen[p] = true
			}
			if len(seen) == len(want) {
				return
			}
			last = fmt.Sprintf("%d of %d records are rows", len(seen), len(want))
		} else {
			last = err.Error()
		}
		if m.exited() {
			t.Fatalf("step: scan: minkdev exited (%v); last scan: %s", m.err, last)
		}
		if time.Now().After(deadline) {
			t.Fatalf("step: scan: not every record is a row within %v; last scan: %s\n%s",
				scanTimeout, last, describe(info))
		}
		time.Sleep(time.Second)
	}
}

type row struct {
	ID        *int64 `json:"id"`
	Partition int32  `json:"_kafka_partition"`
	Offset    int64  `json:"_kafka_offset"`
}

// scan reads the whole demo table through the catalog and S3, as a user would.
func scan(info devcluster.RunInfo) ([]row, error) {
	cmd := exec.Command(filepath.Join(binDir, "minkctl"), "scan", info.Table, "--catalog", info.CatalogURL,
		"--columns", "id,_kafka_partition,_kafka_offset", "--limit", "0", "-o", "json")
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("minkctl scan: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var rows []row
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("minkctl scan printed %q: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// describe is `minkctl table describe`: how far indexing got, for a failure message.
func describe(info devcluster.RunInfo) string {
	addr := devcluster.Addr(info.Processes[0].GRPCPort)
	out, err := exec.Command(filepath.Join(binDir, "minkctl"), "--addr", addr, "table", "describe", info.Table).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("minkctl table describe: %v: %s", err, out)
	}
	return "minkctl table describe:\n" + string(out)
}

// checkNothingLeft checks that no process of the run lives on (the roles, Postgres and
// its backends: each leads its own process group) and that every port is free again.
func checkNothingLeft(t *testing.T, dir string, info devcluster.RunInfo) {
	t.Helper()
	groups := map[string]int{"postgres": info.PostgresPid}
	for _, p := range info.Processes {
		groups[p.ID] = p.Pid
	}
	for name, pid := range groups {
		if pid <= 0 {
			t.Errorf("no pid recorded for %s", name)
			continue
		}
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("step: stop: %s (process group %d) is still alive after minkdev exited (kill: %v)", name, pid, err)
		}
	}
	// Postgres backends lead their own sessions, outside the postmaster's group: find
	// them, and anything else of this run, by what ties them to its folder.
	for _, p := range procsUnder(dir) {
		t.Errorf("step: stop: process %s is still alive after minkdev exited", p)
	}
	for _, p := range info.Ports {
		if !portsFree(p, 1) {
			t.Errorf("step: stop: port %d is still taken after minkdev exited", p)
		}
	}
}

// procsUnder lists the live processes whose working folder is in dir (Postgres and its
// backends run in their data folder) or whose command line names it (the roles' flags).
func procsUnder(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
			continue // a zombie holds nothing; its parent has yet to reap it
		}
		if strings.HasPrefix(cwd, dir+"/") || cwd == dir || bytes.Contains(cmdline, []byte(dir+"/")) {
			out = append(out, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return out
}
