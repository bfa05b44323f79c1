package auth

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
)

// Generate is a fresh auth config: a random cluster secret, and the principals "admin"
// (role admin) and "reader" (role reader of readerTables) with random secrets. Secrets
// are hex, safe unquoted in a shell, a properties file, a SQL string and a URL. What
// make dev and `minkctl auth init` write.
func Generate(readerTables []string) (*File, error) {
	secret := func(n int) string {
		b := make([]byte, n)
		rand.Read(b) // never fails (crypto/rand)
		return hex.EncodeToString(b)
	}
	f := &File{ClusterSecret: secret(32), Principals: []PrincipalConfig{
		{ID: "admin", Secret: secret(24), Role: RoleAdmin},
		{ID: "reader", Secret: secret(24), Role: RoleReader, Tables: readerTables},
	}}
	check := *f // Validate fills in the TTLs' defaults; the file leaves them out
	if err := check.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// WriteFile writes f to path with mode 0600, all at once: a node watching the file never
// reads half of it.
func WriteFile(path string, f *File) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".auth-*.json") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing left to remove
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
