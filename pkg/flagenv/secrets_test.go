package flagenv_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minkhq/mink/pkg/flagenv"
)

// RedactURL masks the password wherever it stands and however it is written, and keeps
// what tells the reader which server is meant.
func TestRedactURL(t *testing.T) {
	for _, c := range []struct {
		raw, want string
		secrets   []string // none of these may show
	}{
		// The password equal to the user name: the user name stays, the password goes
		// (a text replace would have masked the scheme and shown the password).
		{"postgres://postgres:postgres@127.0.0.1:5432/postgres", "postgres://postgres:xxxxx@127.0.0.1:5432/postgres", nil},
		{"postgres://mink:s3cret@db:5432/mink?sslmode=disable", "postgres://mink:xxxxx@db:5432/mink?sslmode=disable", []string{"s3cret"}},
		// Percent-encoded: neither the encoded nor the decoded form shows.
		{"postgres://u:p%40ss%3Aw%2Frd@db/mink", "postgres://u:xxxxx@db/mink", []string{"p%40ss", "p@ss", "ss:w", "w/rd", "%2Frd"}},
		// '@' and ':' in the password, not encoded.
		{"postgres://u:p@ss:word@db:5432/mink", "postgres://u:xxxxx@db:5432/mink", []string{"p@ss", "ss:word"}},
		{"postgresql://u:a:b:c@db/mink", "postgresql://u:xxxxx@db/mink", []string{"a:b:c"}},
		// A password in the query, as libpq and pgx take it.
		{"postgres://u@db/mink?password=hunter2&sslmode=require", "postgres://u@db/mink?password=xxxxx&sslmode=require", []string{"hunter2"}},
		{"postgres://db/mink?sslpassword=k3y", "postgres://db/mink?sslpassword=xxxxx", []string{"k3y"}},
		// A registry URL with basic auth.
		{"https://sr-user:sr-pass@registry.example.com:8081", "https://sr-user:xxxxx@registry.example.com:8081", []string{"sr-pass"}},
		// Nothing to hide.
		{"postgres://u@db:5432/mink", "postgres://u@db:5432/mink", nil},
		{"http://127.0.0.1:8081", "http://127.0.0.1:8081", nil},
		// keyword/value.
		{"host=db user=u password=hunter2 dbname=mink", "host=db user=u password=xxxxx dbname=mink", []string{"hunter2"}},
		{"host=db password='hunter 2' dbname=mink", "host=db password=xxxxx dbname=mink", []string{"hunter"}},
		// Does not parse as a URL (a bad escape in the password): only what follows the '@'.
		{"postgres://u:p%zz@ss@db:5432/mink?x=1", "postgres://xxxxx@db:5432/mink", []string{"p%zz", "u:p"}},
	} {
		got := flagenv.RedactURL(c.raw)
		if got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.raw, got, c.want)
		}
		for _, s := range c.secrets {
			if strings.Contains(got, s) {
				t.Errorf("RedactURL(%q) = %q shows %q", c.raw, got, s)
			}
		}
	}
}

func TestReadSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok", "postgres://u:pw@db/mink\n", 0o600)
	if v, err := flagenv.ReadSecretFile(ok); err != nil || v != "postgres://u:pw@db/mink" {
		t.Errorf("a 0600 file: %q, %v", v, err)
	}
	ro := write("ro", "secret", 0o400)
	if v, err := flagenv.ReadSecretFile(ro); err != nil || v != "secret" {
		t.Errorf("a 0400 file: %q, %v", v, err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ok, link); err != nil {
		t.Fatal(err)
	}
	if v, err := flagenv.ReadSecretFile(link); err != nil || v != "postgres://u:pw@db/mink" {
		t.Errorf("a link to a 0600 file: %q, %v", v, err)
	}
	for name, mode := range map[string]os.FileMode{"world": 0o644, "group": 0o640, "others-write": 0o602} {
		p := write(name, "postgres://u:pw@db/mink", mode)
		_, err := flagenv.ReadSecretFile(p)
		if err == nil || !strings.Contains(err.Error(), "chmod 600 "+p) || strings.Contains(err.Error(), "pw@") {
			t.Errorf("a %04o file: %v; want it refused naming the fix, without the secret", mode, err)
		}
	}
	for name, content := range map[string]string{"empty": "\n", "lines": "a\nb\n"} {
		if _, err := flagenv.ReadSecretFile(write(name, content, 0o600)); err == nil {
			t.Errorf("file %s accepted", name)
		}
	}
	if _, err := flagenv.ReadSecretFile(dir); err == nil {
		t.Errorf("a folder accepted")
	}
}
