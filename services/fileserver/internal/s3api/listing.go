package s3api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/services/fileserver/internal/files"
)

// s3NS is the namespace of S3's XML answers.
const s3NS = "http://s3.amazonaws.com/doc/2006-03-01/"

// listBucketResult is the answer of ListObjectsV2 and of ListObjects (v1): the same
// element, with KeyCount, ContinuationToken and StartAfter in v2 and Marker in v1.
type listBucketResult struct {
	XMLName               xml.Name       `xml:"ListBucketResult"`
	NS                    string         `xml:"xmlns,attr"`
	Name                  string         `xml:"Name"`
	Prefix                string         `xml:"Prefix"`
	Marker                *string        `xml:"Marker,omitempty"`
	NextMarker            string         `xml:"NextMarker,omitempty"`
	StartAfter            string         `xml:"StartAfter,omitempty"`
	ContinuationToken     string         `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string         `xml:"NextContinuationToken,omitempty"`
	KeyCount              *int           `xml:"KeyCount,omitempty"`
	MaxKeys               int            `xml:"MaxKeys"`
	Delimiter             string         `xml:"Delimiter,omitempty"`
	EncodingType          string         `xml:"EncodingType,omitempty"`
	IsTruncated           bool           `xml:"IsTruncated"`
	Contents              []listEntry    `xml:"Contents"`
	CommonPrefixes        []commonPrefix `xml:"CommonPrefixes"`
}

type listEntry struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
}

type commonPrefix struct {
	Prefix string `xml:"Prefix"`
}

// listAllMyBucketsResult is the answer of ListBuckets.
type listAllMyBucketsResult struct {
	XMLName xml.Name     `xml:"ListAllMyBucketsResult"`
	NS      string       `xml:"xmlns,attr"`
	Owner   bucketOwner  `xml:"Owner"`
	Buckets []bucketItem `xml:"Buckets>Bucket"`
	Prefix  string       `xml:"Prefix,omitempty"`
}

type bucketOwner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

type bucketItem struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
	BucketRegion string `xml:"BucketRegion"`
}

// s3Time is how S3's XML writes a time.
const s3Time = "2006-01-02T15:04:05.000Z"

// list answers ListObjectsV2 (list-type=2) and ListObjects: the committed files of the
// tables p may read, a page at a time.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, p *auth.Principal, q url.Values, fail func(error, about)) {
	badParam := func(name, value, format string, args ...any) {
		fail(apierr.Invalid(name, format, args...), about{bucket: layout.Bucket, value: value})
	}
	v2 := false
	if q.Has("list-type") {
		if lt := q.Get("list-type"); lt != "2" {
			badParam("list-type", lt, "Invalid list type %q: 2 is ListObjectsV2; without list-type the request is ListObjects", lt)
			return
		}
		v2 = true
	}
	enc := q.Get("encoding-type")
	if q.Has("encoding-type") && enc != "url" {
		badParam("encoding-type", enc, "Invalid Encoding Method specified in Request: only url is supported")
		return
	}
	maxKeys := objects.MaxKeys
	if q.Has("max-keys") {
		n, err := strconv.Atoi(q.Get("max-keys"))
		if err != nil || n < 0 {
			badParam("max-keys", q.Get("max-keys"), "Provided max-keys not an integer or within integer range: %q", q.Get("max-keys"))
			return
		}
		maxKeys = min(n, objects.MaxKeys) // S3 lists at most 1000 a page, whatever was asked
	}
	params := []string{"prefix", "delimiter", "start-after", "marker"}
	for _, name := range params {
		if v := q.Get(name); !utf8.ValidString(v) || strings.ContainsRune(v, 0) || len(v) > files.MaxKeyLen {
			badParam(name, v, "%s must be UTF-8 without NUL, at most %d bytes: S3 keys are", name, files.MaxKeyLen)
			return
		}
	}
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	query := objects.Query{Prefix: prefix, Delimiter: delim, Max: maxKeys}
	res := listBucketResult{NS: s3NS, Name: layout.Bucket, Prefix: encode(enc, prefix), MaxKeys: maxKeys,
		Delimiter: encode(enc, delim), EncodingType: enc}
	token := q.Get("continuation-token")
	switch {
	case v2 && token != "":
		c, ok := decodeToken(token)
		if !ok {
			badParam("continuation-token", token, "The continuation token provided is incorrect")
			return
		}
		query.After = c
		res.ContinuationToken = token
		res.StartAfter = encode(enc, q.Get("start-after")) // echoed, not used: the token says where to go on
	case v2:
		query.After = objects.StartAfter(q.Get("start-after"), prefix, delim)
		res.StartAfter = encode(enc, q.Get("start-after"))
	default:
		query.After = objects.StartAfter(q.Get("marker"), prefix, delim)
		m := encode(enc, q.Get("marker"))
		res.Marker = &m
	}

	var readable func(ns, name string) bool
	if !p.IsAdmin() {
		readable = p.CanRead
	}
	l, err := h.files.List(r.Context(), query, readable)
	if err != nil {
		fail(err, about{bucket: layout.Bucket, what: "s3 listing failed", attrs: []any{"principal", p.ID, "prefix", prefix}})
		return
	}
	for _, o := range l.Objects {
		res.Contents = append(res.Contents, listEntry{Key: encode(enc, o.Key), LastModified: o.LastModified.UTC().Format(s3Time),
			ETag: o.ETag, Size: o.Size, StorageClass: "STANDARD"})
	}
	for _, cp := range l.CommonPrefixes {
		res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{Prefix: encode(enc, cp)})
	}
	res.IsTruncated = l.Truncated
	if v2 {
		n := len(l.Objects) + len(l.CommonPrefixes)
		res.KeyCount = &n
		if l.Truncated {
			res.NextContinuationToken = encodeToken(l.Next)
		}
	} else if l.Truncated {
		res.NextMarker = encode(enc, l.Next.Key)
	}
	writeXML(w, res)
}

// listBuckets answers ListBuckets: Mink's one bucket, to any principal (what it may read
// in it is the listing's to say).
func (h *Handler) listBuckets(w http.ResponseWriter, r *http.Request, p *auth.Principal, q url.Values, fail func(error, about)) {
	if q.Has("max-buckets") {
		if n, err := strconv.Atoi(q.Get("max-buckets")); err != nil || n < 1 || n > 10000 {
			fail(apierr.Invalid("max-buckets", "max-buckets must be an integer from 1 to 10000: %q", q.Get("max-buckets")),
				about{value: q.Get("max-buckets")})
			return
		}
	}
	created, err := h.files.BucketCreated(r.Context())
	if err != nil {
		fail(err, about{what: "s3 bucket listing failed", attrs: []any{"principal", p.ID}})
		return
	}
	res := listAllMyBucketsResult{NS: s3NS, Owner: bucketOwner{ID: p.ID, DisplayName: p.ID}, Prefix: q.Get("prefix")}
	region := q.Get("bucket-region")
	if strings.HasPrefix(layout.Bucket, q.Get("prefix")) && (region == "" || region == h.region) {
		res.Buckets = []bucketItem{{Name: layout.Bucket, CreationDate: created.UTC().Format(s3Time), BucketRegion: h.region}}
	}
	writeXML(w, res)
}

// location answers GetBucketLocation: S3 says us-east-1 as an empty constraint.
func (h *Handler) location(w http.ResponseWriter, r *http.Request) {
	region := h.region
	if region == "us-east-1" {
		region = ""
	}
	writeXML(w, struct {
		XMLName xml.Name `xml:"LocationConstraint"`
		NS      string   `xml:"xmlns,attr"`
		Region  string   `xml:",chardata"`
	}{NS: s3NS, Region: region})
}

func writeXML(w http.ResponseWriter, v any) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	if err := xml.NewEncoder(&b).Encode(v); err != nil {
		// Only strings, numbers and bools: encoding cannot fail.
		panic(err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	w.Write(b.Bytes())
}

// encode is s as a listing with encoding-type enc writes it: URL-encoded with "url" (as
// S3 does, so that keys XML cannot hold survive; "/" stays as it is), else as it is.
func encode(enc, s string) string {
	if enc != "url" {
		return s
	}
	return strings.ReplaceAll(url.QueryEscape(s), "%2F", "/")
}

// A continuation token is a cursor (objects.Cursor) in URL-safe base64: a version, a
// flag (1: past every key with the cursor's prefix), the key, and a checksum by which a
// token that was cut or changed is refused rather than taken for another position. It
// carries no authority: every page checks what the principal may read.
const (
	tokenVersion = 1
	tokenSum     = 8
)

func encodeToken(c objects.Cursor) string {
	b := make([]byte, 0, 2+len(c.Key)+tokenSum)
	flag := byte(0)
	if c.PastPrefix {
		flag = 1
	}
	b = append(b, tokenVersion, flag)
	b = append(b, c.Key...)
	return base64.RawURLEncoding.EncodeToString(append(b, tokenChecksum(b)...))
}

func decodeToken(s string) (objects.Cursor, bool) {
	if len(s) > 2*files.MaxKeyLen {
		return objects.Cursor{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 2+tokenSum || b[0] != tokenVersion || b[1] > 1 {
		return objects.Cursor{}, false
	}
	body, sum := b[:len(b)-tokenSum], b[len(b)-tokenSum:]
	key := string(body[2:])
	if !bytes.Equal(sum, tokenChecksum(body)) || !utf8.ValidString(key) || strings.ContainsRune(key, 0) {
		return objects.Cursor{}, false
	}
	return objects.Cursor{Key: key, PastPrefix: body[1] == 1}, true
}

func tokenChecksum(body []byte) []byte {
	h := sha256.New()
	h.Write([]byte("mink list token\x00"))
	h.Write(body)
	return h.Sum(nil)[:tokenSum]
}
