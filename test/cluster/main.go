package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/roleproc"
)

// binDir holds what Run built: the role binaries and the suite's tools.
var binDir string

// Main builds the role binaries and the main packages cmds names (such as
// "./cmd/minkctl"), runs the tests and exits: the TestMain of a suite with nothing else
// to do around its tests.
func Main(m *testing.M, cmds ...string) { os.Exit(Run(m, cmds...)) }

// Run builds the binaries as Main does, runs the tests and removes what it made (the
// binaries and the shared Postgres server), returning the exit code.
func Run(m *testing.M, cmds ...string) int {
	code, err := func() (int, error) {
		root, err := roleproc.ModuleRoot()
		if err != nil {
			return 1, err
		}
		if binDir, err = os.MkdirTemp("", "mink-test-bin-"); err != nil {
			return 1, err
		}
		defer os.RemoveAll(binDir)
		start := time.Now()
		if err := roleproc.Build(context.Background(), root, binDir, append(roleproc.RolePackages(), cmds...)...); err != nil {
			return 1, err
		}
		fmt.Fprintf(os.Stderr, "cluster: built the binaries in %v\n", time.Since(start).Round(time.Millisecond))
		return m.Run(), nil
	}()
	pgtest.Shutdown()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
	}
	return code
}

// Bin is the path of a binary Run built: "mink-indexer", "minkctl".
func Bin(name string) string { return filepath.Join(BinDir(), name) }

// RepoRoot is the module's root folder.
func RepoRoot() string {
	root, err := roleproc.ModuleRoot()
	if err != nil {
		panic(err)
	}
	return root
}

// Tool finds a tool the Makefile installs (.tmp/bin), then on PATH; "" when absent.
func Tool(name string) string {
	if p := filepath.Join(RepoRoot(), ".tmp", "bin", name); fileExists(p) {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// BinDir is the folder of the binaries Run built (for a launcher's --bin-dir).
func BinDir() string {
	if binDir == "" {
		panic("cluster: no binaries: call cluster.Main or cluster.Run from TestMain")
	}
	return binDir
}
