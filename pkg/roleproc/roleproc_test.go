package roleproc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/await"
)

// script starts /bin/sh running body as a process of this package, its log in a test
// folder.
func script(t *testing.T, body string) *Process {
	t.Helper()
	p, err := Start(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", body}, LogPath: filepath.Join(t.TempDir(), "logs", "sh.log"),
		Env: []string{"MINK_FROM_SPEC=kept"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

func TestWaitStartedReadsTheStartingLine(t *testing.T) {
	// Noise first, the starting line written in two pieces, as a slow writer might.
	p := script(t, `echo '{"msg":"auth is on"}'; printf '{"level":"INFO","msg":"starting","grpc_addr":"127.0.0.1:4'; sleep 0.2;
		echo '1","advertise_addr":"h:41","metrics_addr":"127.0.0.1:42"}'; exec sleep 30`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := p.WaitStarted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s != (Started{GRPCAddr: "127.0.0.1:41", AdvertiseAddr: "h:41", MetricsAddr: "127.0.0.1:42"}) {
		t.Errorf("started %+v", s)
	}
	if !strings.Contains(p.Output(), "auth is on") {
		t.Errorf("output %q", p.Output())
	}
}

func TestWaitStartedFailsWhenTheProcessExits(t *testing.T) {
	p := script(t, `echo 'bad flag: --lease-ttl'; exit 2`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := p.WaitStarted(ctx)
	if err == nil || !strings.Contains(err.Error(), "exited at start") || !strings.Contains(err.Error(), "bad flag: --lease-ttl") {
		t.Errorf("WaitStarted: %v", err)
	}
	if st, err := p.Wait(5 * time.Second); err != nil || st.ExitCode() != 2 || p.Err() == nil {
		t.Errorf("exit: %v %v %v", st, err, p.Err())
	}
}

func TestEnvironmentIsCleanButForTheSpec(t *testing.T) {
	t.Setenv("MINK_POSTGRES_URL", "postgres://developer")
	p := script(t, `env`)
	if _, err := p.Wait(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	out := p.Output()
	if strings.Contains(out, "MINK_POSTGRES_URL") || !strings.Contains(out, "MINK_FROM_SPEC=kept") {
		t.Errorf("environment:\n%s", out)
	}
}

func TestStopIsSIGTERMThenKill(t *testing.T) {
	// Exits cleanly on SIGTERM.
	p := script(t, `trap 'echo leaving; exit 0' TERM; echo up; while :; do sleep 0.05; done`)
	waitOutput(t, p, "up")
	if err := p.Stop(5*time.Second, nil); err != nil {
		t.Errorf("clean stop: %v", err)
	}
	if !strings.Contains(p.Output(), "leaving") {
		t.Errorf("no SIGTERM seen: %q", p.Output())
	}

	// Ignores SIGTERM: killed after the grace; a paused one is continued first.
	p = script(t, `trap '' TERM; echo up; while :; do sleep 0.05; done`)
	waitOutput(t, p, "up")
	if err := p.Signal(syscall.SIGSTOP); err != nil || !p.Paused() {
		t.Fatalf("pause: %v %v", err, p.Paused())
	}
	start := time.Now()
	err := p.Stop(300*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "killed") || !p.Exited() || time.Since(start) > 5*time.Second {
		t.Errorf("stop of a process ignoring SIGTERM: %v after %v", err, time.Since(start))
	}
}

func TestKillEndsAPausedProcess(t *testing.T) {
	p := script(t, `echo up; exec sleep 30`)
	waitOutput(t, p, "up")
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if !p.Exited() || p.Paused() || p.State().Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("after Kill: exited %v, paused %v, %v", p.Exited(), p.Paused(), p.State())
	}
}

func TestFlagsArgs(t *testing.T) {
	got := Flags{NodeID: "fs-1", PostgresURL: "postgres://x", KafkaBrokers: []string{"a:1", "b:2"}, GRPCAddr: "127.0.0.1:0",
		LeaseTTL: 1500 * time.Millisecond, AuthConfig: "/a.json", CatalogAddr: "127.0.0.1:0", Extra: []string{"--lease-ttl", "3s"}}.Args()
	want := []string{"--node-id", "fs-1", "--kafka-brokers", "a:1,b:2", "--grpc-addr", "127.0.0.1:0",
		"--lease-ttl", "1.5s", "--auth-config", "/a.json", "--catalog-addr", "127.0.0.1:0", "--lease-ttl", "3s"}
	if !slices.Equal(got, want) {
		t.Errorf("args\n got %q\nwant %q", got, want)
	}
	// The Postgres URL may hold a password: in the environment, never on the command line.
	if env := (Flags{PostgresURL: "postgres://u:pw@db/x"}).Env(); !slices.Equal(env, []string{"MINK_POSTGRES_URL=postgres://u:pw@db/x"}) {
		t.Errorf("env %q", env)
	}
}

func TestStartNamesAMissingBinary(t *testing.T) {
	_, err := Start(Spec{Name: "x", Path: filepath.Join(t.TempDir(), "mink-indexer"), LogPath: filepath.Join(t.TempDir(), "x.log")})
	if err == nil || !strings.Contains(err.Error(), "mink-indexer") || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("start of a missing binary: %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func waitOutput(t *testing.T, p *Process, s string) {
	t.Helper()
	await.For(t, 10*time.Second, fmt.Sprintf("%q in the output", s), func() (string, bool) {
		out := p.Output()
		return out, strings.Contains(out, s)
	})
}
