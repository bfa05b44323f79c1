package s3api_test

import (
	"encoding/xml"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/objects"
)

// listResult is ListBucketResult as a client reads it.
type listResult struct {
	XMLName               xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name                  string
	Prefix                string
	Delimiter             string
	Marker                *string
	NextMarker            string
	StartAfter            string
	ContinuationToken     string
	NextContinuationToken string
	KeyCount              *int
	MaxKeys               int
	EncodingType          string
	IsTruncated           bool
	Contents              []struct {
		Key, LastModified, ETag, StorageClass string
		Size                                  int64
	}
	CommonPrefixes []struct{ Prefix string }
}

func parseList(t *testing.T, got answer) listResult {
	t.Helper()
	var l listResult
	if got.status != 200 || got.header.Get("Content-Type") != "application/xml" {
		t.Fatalf("listing: %d %s %q", got.status, got.header.Get("Content-Type"), got.body)
	}
	if err := xml.Unmarshal(got.body, &l); err != nil {
		t.Fatalf("listing: %v: %q", err, got.body)
	}
	return l
}

var modified = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// TestListAnswer: what Files.List gives is written as S3's ListBucketResult, v2 and v1,
// with its continuation token or marker, and keys URL-encoded when asked.
func TestListAnswer(t *testing.T) {
	s := start(t, nil)
	s.fake.listing = objects.Listing{
		Objects: []objects.Object{
			{Key: "default/orders/data/_kafka_partition=0/a b+c&d.parquet", Size: 10, ETag: `"aa"`, LastModified: modified},
			{Key: "default/orders/metadata/v1.metadata.json", Size: 20, ETag: `"bb"`, LastModified: modified},
		},
		CommonPrefixes: []string{"default/orders/x/"},
		Truncated:      true,
		Next:           objects.Cursor{Key: "default/orders/x/", PastPrefix: true},
	}
	l := parseList(t, get(t, "GET", s.url+"/mink?list-type=2&prefix=default%2F&delimiter=%2F&max-keys=3&start-after=default%2Fa", nil))
	if l.Name != "mink" || l.Prefix != "default/" || l.Delimiter != "/" || l.MaxKeys != 3 || l.KeyCount == nil || *l.KeyCount != 3 ||
		!l.IsTruncated || l.NextContinuationToken == "" || l.StartAfter != "default/a" || l.Marker != nil || len(l.Contents) != 2 ||
		len(l.CommonPrefixes) != 1 || l.CommonPrefixes[0].Prefix != "default/orders/x/" {
		t.Fatalf("v2 page: %+v", l)
	}
	c := l.Contents[0]
	if c.Key != s.fake.listing.Objects[0].Key || c.Size != 10 || c.ETag != `"aa"` || c.LastModified != "2025-01-02T03:04:05.000Z" || c.StorageClass != "STANDARD" {
		t.Errorf("an entry: %+v", c)
	}
	q := s.fake.queries[0]
	if q.Prefix != "default/" || q.Delimiter != "/" || q.Max != 3 || q.After != (objects.Cursor{Key: "default/a"}) {
		t.Errorf("the query: %+v", q)
	}

	// The token brings the cursor back; start-after is then ignored, as by S3.
	next := parseList(t, get(t, "GET", s.url+"/mink?list-type=2&start-after=zzz&continuation-token="+url.QueryEscape(l.NextContinuationToken), nil))
	if q := s.fake.queries[1]; q.After != s.fake.listing.Next || q.Max != 1000 || next.ContinuationToken != l.NextContinuationToken || next.MaxKeys != 1000 {
		t.Errorf("the next page's query %+v, answer %+v", q, next)
	}

	// encoding-type=url: keys, prefixes and echoed parameters URL-encoded; they decode back.
	enc := parseList(t, get(t, "GET", s.url+"/mink?list-type=2&encoding-type=url&prefix=default%2Fa+b", nil))
	if enc.EncodingType != "url" || enc.Prefix != "default/a+b" {
		t.Errorf("encoded prefix %q (encoding %q)", enc.Prefix, enc.EncodingType)
	}
	for i, o := range s.fake.listing.Objects {
		if k, err := url.QueryUnescape(enc.Contents[i].Key); err != nil || k != o.Key || enc.Contents[i].Key == o.Key && strings.ContainsAny(o.Key, " +&=") {
			t.Errorf("encoded key %q (decoded %q, %v), want %q encoded", enc.Contents[i].Key, k, err, o.Key)
		}
	}

	// ListObjects (v1): Marker echoed, NextMarker the last entry, no KeyCount.
	v1 := parseList(t, get(t, "GET", s.url+"/mink?marker=default%2Fm&max-keys=2000", nil))
	if v1.Marker == nil || *v1.Marker != "default/m" || v1.NextMarker != "default/orders/x/" || v1.KeyCount != nil || v1.MaxKeys != 1000 ||
		v1.NextContinuationToken != "" {
		t.Errorf("v1 page: %+v", v1)
	}
	if q := s.fake.queries[3]; q.After != (objects.Cursor{Key: "default/m"}) || q.Max != 1000 {
		t.Errorf("v1 query: %+v", q)
	}
	// A marker that is one of the listing's common prefixes resumes after all of it.
	parseList(t, get(t, "GET", s.url+"/mink?marker=default%2Forders%2F&delimiter=%2F&prefix=default%2F", nil))
	if q := s.fake.queries[4]; q.After != (objects.Cursor{Key: "default/orders/", PastPrefix: true}) {
		t.Errorf("marker at a common prefix: %+v", q.After)
	}

	s.fake.listing = objects.Listing{}
	empty := parseList(t, get(t, "GET", s.url+"/mink?list-type=2&max-keys=0", nil))
	if empty.IsTruncated || empty.NextContinuationToken != "" || *empty.KeyCount != 0 || empty.MaxKeys != 0 || s.fake.queries[5].Max != 0 {
		t.Errorf("max-keys=0: %+v", empty)
	}
}

// TestListBadParameters: each bad parameter is an S3 InvalidArgument naming it, and
// lists nothing; a continuation token that was changed is refused.
func TestListBadParameters(t *testing.T) {
	s := start(t, nil)
	s.fake.listing = objects.Listing{Objects: []objects.Object{{Key: "default/orders/f", LastModified: modified}},
		Truncated: true, Next: objects.Cursor{Key: "default/orders/f"}}
	token := parseList(t, get(t, "GET", s.url+"/mink?list-type=2&max-keys=1", nil)).NextContinuationToken
	raw := []byte(token)
	raw[len(raw)/2] ^= 1 // another base64 digit: another key or checksum
	for _, c := range []struct{ query, param string }{
		{"list-type=3", "list-type"},
		{"list-type=", "list-type"},
		{"list-type=2&max-keys=-1", "max-keys"},
		{"list-type=2&max-keys=ten", "max-keys"},
		{"list-type=2&max-keys=99999999999999999999", "max-keys"},
		{"max-keys=1.5", "max-keys"},
		{"list-type=2&encoding-type=xml", "encoding-type"},
		{"list-type=2&continuation-token=" + url.QueryEscape(string(raw)), "continuation-token"},
		{"list-type=2&continuation-token=" + token[:len(token)-2], "continuation-token"},
		{"list-type=2&continuation-token=not-a-token", "continuation-token"},
		{"list-type=2&continuation-token=%2F%2F%2F%2F", "continuation-token"},
		{"list-type=2&prefix=%FF", "prefix"},
		{"list-type=2&delimiter=%C3", "delimiter"},
		{"list-type=2&start-after=a%00b", "start-after"},
		{"marker=" + strings.Repeat("m", 1100), "marker"},
	} {
		before := s.fake.lists.Load()
		got := get(t, "GET", s.url+"/mink?"+c.query, nil)
		if got.status != 400 || got.err.Code != "InvalidArgument" || !strings.Contains(got.err.Message, c.param) ||
			!strings.Contains(string(got.body), "<ArgumentName>"+c.param+"</ArgumentName>") || got.err.RequestID == "" {
			t.Errorf("?%s: %d %+v %s, want 400 InvalidArgument naming %s", c.query, got.status, got.err, got.body, c.param)
		}
		if s.fake.lists.Load() != before {
			t.Errorf("?%s: listed", c.query)
		}
	}
}

// TestListWhoMayRead: an admin lists every table; a reader's listing is limited to the
// tables it may read; a failure says what Mink was doing, never the driver's words.
func TestListWhoMayRead(t *testing.T) {
	a := authority(t)
	s := start(t, a)
	reader := &aws.Credentials{AccessKeyID: "reader", SecretAccessKey: readerSecret}
	admin := &aws.Credentials{AccessKeyID: "admin", SecretAccessKey: adminSecret}
	parseList(t, get(t, "GET", s.url+"/mink?list-type=2", admin))
	parseList(t, get(t, "GET", s.url+"/mink?list-type=2", reader))
	if s.fake.readable[0] != nil {
		t.Error("an admin's listing is limited")
	}
	if r := s.fake.readable[1]; r == nil || !r("default", "orders") || r("sales", "orders") {
		t.Error("a reader's listing is not limited to default.*")
	}

	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5432}, Err: syscall.ECONNREFUSED}
	s.fake.set(apierr.Wrap(apierr.Unavailable, fmt.Errorf("failed to connect to `user=mink`: %w", dial), "list the bucket: postgres is unavailable"))
	got := get(t, "GET", s.url+"/mink?list-type=2", admin)
	if got.status != 503 || got.err.Code != "ServiceUnavailable" || !strings.Contains(got.err.Message, "postgres is unavailable") ||
		strings.Contains(string(got.body), "10.1.2.3") {
		t.Errorf("postgres down: %d %+v", got.status, got.err)
	}
	s.fake.set(fmt.Errorf("list the bucket: %w", &pgconn.PgError{Severity: "ERROR", Code: "42P01", Message: `relation "mink_data_files" does not exist`}))
	got = get(t, "GET", s.url+"/mink?list-type=2", admin)
	if got.status != 500 || got.err.Code != "InternalError" || strings.Contains(string(got.body), "SQLSTATE") || strings.Contains(string(got.body), "mink_data_files") {
		t.Errorf("a bug: %d %s", got.status, got.body)
	}
}

// TestListBuckets: GET / is ListBuckets of the one bucket; HEAD of the bucket and
// ?location say its region.
func TestListBuckets(t *testing.T) {
	a := authority(t)
	s := start(t, a)
	reader := &aws.Credentials{AccessKeyID: "reader", SecretAccessKey: readerSecret}
	var res struct {
		XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListAllMyBucketsResult"`
		Owner   struct{ ID, DisplayName string }
		Buckets []struct{ Name, CreationDate, BucketRegion string } `xml:"Buckets>Bucket"`
	}
	got := get(t, "GET", s.url+"/", reader)
	if err := xml.Unmarshal(got.body, &res); err != nil || got.status != 200 || len(res.Buckets) != 1 || res.Buckets[0].Name != "mink" ||
		res.Buckets[0].CreationDate != "2024-05-06T07:08:09.000Z" || res.Buckets[0].BucketRegion != "eu-west-1" || res.Owner.ID != "reader" {
		t.Errorf("ListBuckets: %d %v %s", got.status, err, got.body)
	}
	res.Buckets = nil
	got = get(t, "GET", s.url+"/?prefix=other", reader)
	if err := xml.Unmarshal(got.body, &res); err != nil || got.status != 200 || len(res.Buckets) != 0 {
		t.Errorf("ListBuckets by another prefix: %d %s", got.status, got.body)
	}
	if got := get(t, "GET", s.url+"/?max-buckets=0", reader); got.status != 400 || got.err.Code != "InvalidArgument" ||
		!strings.Contains(got.err.Message, "max-buckets") {
		t.Errorf("max-buckets=0: %d %+v", got.status, got.err)
	}
	if got := get(t, "HEAD", s.url+"/", reader); got.status != 405 {
		t.Errorf("HEAD /: %d", got.status)
	}
	if got := get(t, "HEAD", s.url+"/mink", reader); got.status != 200 || got.header.Get("X-Amz-Bucket-Region") != "eu-west-1" {
		t.Errorf("HeadBucket: %d, region %q", got.status, got.header.Get("X-Amz-Bucket-Region"))
	}
	var loc struct {
		XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ LocationConstraint"`
		Region  string   `xml:",chardata"`
	}
	got = get(t, "GET", s.url+"/mink?location", reader)
	if err := xml.Unmarshal(got.body, &loc); err != nil || got.status != 200 || loc.Region != "eu-west-1" {
		t.Errorf("GetBucketLocation: %d %v %s", got.status, err, got.body)
	}
	if n := s.fake.calls.Load(); n != 0 {
		t.Errorf("bucket requests opened %d files", n)
	}
}
