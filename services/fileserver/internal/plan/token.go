package plan

// Plan ids and plan tasks are stateless tokens: what is needed to make the same plan
// again (the table, the metadata file it was made from, the snapshots, the filter as
// the client sent it, the statistics asked for) and which batch of its files, with an
// expiry. Any file server answers any token, and no server holds plan state.
//
// A token is not a secret and needs no signature: it says nothing the client could not
// ask itself, and every use checks it again (the caller may read the table of the path,
// the token is of that table, its metadata file is still stored). A checksum turns a
// damaged or edited token into a 404, never a plan of something else by accident.

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"
)

const tokenVersion = "p1"

// maxTokenBytes bounds what a token decompresses to (the request body that made it is
// bounded by the catalog's door, 1 MiB).
const maxTokenBytes = 4 << 20

// scanKey is what makes a plan: the same scanKey plans the same files.
type scanKey struct {
	Table    int64  `json:"t"`
	Metadata string `json:"m"` // the metadata file planned from
	// Snapshot is the snapshot of a point-in-time scan; 0 for an incremental one, whose
	// bounds are Start (exclusive; nil: from the first) and End.
	Snapshot int64  `json:"s,omitempty"`
	Start    *int64 `json:"a,omitempty"`
	End      int64  `json:"z,omitempty"`
	// Schema is the schema the request's names resolve in.
	Schema          int             `json:"n"`
	Filter          json.RawMessage `json:"f,omitempty"`
	CaseInsensitive bool            `json:"i,omitempty"`
	Stats           []int           `json:"st,omitempty"` // field ids whose statistics are sent
}

type token struct {
	scanKey
	Expires int64 `json:"e"` // Unix milliseconds
	Batch   int   `json:"b,omitempty"`
}

// encode is t as a token: version, compressed JSON and checksum, URL-safe (plan ids are
// path segments).
func (t token) encode() (string, error) {
	js, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		return "", err
	}
	if _, err := w.Write(js); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(js)
	enc := base64.RawURLEncoding
	return tokenVersion + "." + enc.EncodeToString(buf.Bytes()) + "." + enc.EncodeToString(sum[:12]), nil
}

// errBadToken: not a token of Mink's planner (damaged, edited, or of another version).
var errBadToken = errors.New("not a plan token")

// decodeToken reads a token made by encode.
func decodeToken(s string) (token, error) {
	version, rest, ok := strings.Cut(s, ".")
	if !ok || version != tokenVersion {
		return token{}, errBadToken
	}
	body, check, ok := strings.Cut(rest, ".")
	if !ok {
		return token{}, errBadToken
	}
	enc := base64.RawURLEncoding
	compressed, err1 := enc.DecodeString(body)
	sum, err2 := enc.DecodeString(check)
	if err1 != nil || err2 != nil || len(sum) != 12 {
		return token{}, errBadToken
	}
	js, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(compressed)), maxTokenBytes+1))
	if err != nil || len(js) > maxTokenBytes {
		return token{}, errBadToken
	}
	if got := sha256.Sum256(js); !bytes.Equal(got[:12], sum) {
		return token{}, errBadToken
	}
	var t token
	if err := json.Unmarshal(js, &t); err != nil || t.Table <= 0 || t.Metadata == "" || t.Batch < 0 {
		return token{}, errBadToken
	}
	return t, nil
}

func (t token) expired(now time.Time) bool { return now.UnixMilli() >= t.Expires }
