package node

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/minkhq/mink/pkg/auth"
)

// tokenFileReread is how old a token read from --metrics-token-file may be: a rotated
// Kubernetes Secret or compose volume applies without a restart.
const tokenFileReread = time.Second

// metricsToken is the token /metrics asks for: --metrics-token, or what
// --metrics-token-file holds (surrounding spaces and newlines left out).
type metricsToken struct {
	static string
	path   string
	log    *slog.Logger

	mu  sync.Mutex
	at  time.Time // when val and err were read
	val string
	err error
}

// get is the token in force.
func (m *metricsToken) get() (string, error) {
	if m.path == "" {
		return m.static, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.at) < tokenFileReread {
		return m.val, m.err
	}
	val, err := readTokenFile(m.path)
	if err != nil && m.err == nil {
		m.log.Error("the metrics token file cannot be read: /metrics answers 503 until it can", "file", m.path, "error", err)
	}
	m.at, m.val, m.err = time.Now(), val, err
	return val, err
}

// readTokenFile reads a token file; errors never quote its content.
func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < auth.MinStaticToken {
		return "", fmt.Errorf("%s: the token must be at least %d bytes", path, auth.MinStaticToken)
	}
	return tok, nil
}
