package fileserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// listAll walks every page of a ListObjectsV2 with aws-sdk-go-v2's paginator, limit
// entries a page (0: the server's default), and returns the keys and common prefixes in
// order, and the pages.
func listAll(t *testing.T, cl *s3.Client, in s3.ListObjectsV2Input, limit int32) (objs []types.Object, prefixes []string, pages int) {
	t.Helper()
	in.Bucket = aws.String(layout.Bucket)
	p := s3.NewListObjectsV2Paginator(cl, &in, func(o *s3.ListObjectsV2PaginatorOptions) { o.Limit = limit })
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("ListObjectsV2 %+v, page %d: %v", in, pages+1, err)
		}
		pages++
		if limit > 0 && len(out.Contents)+len(out.CommonPrefixes) > int(limit) || aws.ToInt32(out.KeyCount) != int32(len(out.Contents)+len(out.CommonPrefixes)) {
			t.Fatalf("page %d: %d objects and %d prefixes, KeyCount %d, limit %d", pages, len(out.Contents), len(out.CommonPrefixes), aws.ToInt32(out.KeyCount), limit)
		}
		objs = append(objs, out.Contents...)
		for _, cp := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(cp.Prefix))
		}
		if pages > 1000 {
			t.Fatal("no end after 1000 pages")
		}
	}
	return objs, prefixes, pages
}

func keysOf(objs []types.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, aws.ToString(o.Key))
	}
	return out
}

// TestS3Listing: aws-sdk-go-v2's S3 client lists exactly what Mink serves (every committed
// data and metadata file, sorted bytewise; no live load's files), by prefix and
// delimiter, page by page with its paginator, from start-after; every listed key reads
// with the listed size, ETag and time, through either node; a scoped principal lists
// only the tables it may read; bad parameters are S3 errors naming them.
func TestS3Listing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := saAuthority(t)
	nodes := []*node{e.startNode("fs-a", nodeOptions{auth: a}), e.startNode("fs-b", nodeOptions{auth: a})}
	e.waitMembers(nodes)
	ctx := e.ctx
	bucket := aws.String(layout.Bucket)

	// Another table, in another namespace, with metadata files only; and a live load's
	// metadata file of orders, which GET serves for its TTL and no listing names.
	refunds, err := tables.Create(ctx, e.db, tables.Table{Namespace: "sales", Name: "refunds", Topic: "refunds",
		Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"00001-a.metadata.json", "snap-1-1-b.avro"} {
		if _, err := e.db.Exec(ctx, `INSERT INTO mink_meta_files (table_id, key, content) VALUES ($1, $2, $3)`,
			refunds.ID, layout.MetadataKey("sales", "refunds", name), []byte("refunds "+name)); err != nil {
			t.Fatal(err)
		}
	}
	liveKey := layout.MetadataKey(ns, tableName, "live/00009-c.metadata.json")
	if _, err := e.db.Exec(ctx, `INSERT INTO mink_meta_files (table_id, key, content, expires_at) VALUES ($1, $2, '{}', now() + interval '1 hour')`,
		e.table.ID, liveKey); err != nil {
		t.Fatal(err)
	}

	// What Mink serves: the committed data files and every metadata file the writer
	// stored, sorted as S3 sorts keys.
	var want []string
	for _, f := range e.files {
		want = append(want, f.key)
	}
	rows, err := e.db.Query(ctx, `SELECT key FROM mink_meta_files WHERE key <> $1`, liveKey)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		rows.Scan(&k)
		want = append(want, k)
	}
	rows.Close()
	slices.Sort(want)
	var ordersKeys, refundsKeys []string
	for _, k := range want {
		if strings.HasPrefix(k, "sales/") {
			refundsKeys = append(refundsKeys, k)
		} else {
			ordersKeys = append(ordersKeys, k)
		}
	}

	ops := saClient(nodes[0], saKeys("ops", saOpsSecret, ""))
	all, prefixes, pages := listAll(t, ops, s3.ListObjectsV2Input{}, 0)
	if got := keysOf(all); !slices.Equal(got, want) || len(prefixes) != 0 || pages != 1 {
		t.Fatalf("the whole bucket (%d pages):\n got %q\nwant %q", pages, got, want)
	}
	if slices.Contains(keysOf(all), liveKey) {
		t.Errorf("the live load's metadata file is listed")
	}

	t.Run("pages", func(t *testing.T) {
		for _, limit := range []int32{1, 2, 5} {
			objs, _, pages := listAll(t, ops, s3.ListObjectsV2Input{}, limit)
			if !slices.Equal(keysOf(objs), want) || pages != (len(want)+int(limit)-1)/int(limit) {
				t.Errorf("%d a page: %d pages, %q", limit, pages, keysOf(objs))
			}
		}
		objs, _, _ := listAll(t, ops, s3.ListObjectsV2Input{StartAfter: aws.String(want[2])}, 3)
		if !slices.Equal(keysOf(objs), want[3:]) {
			t.Errorf("start-after %s: %q", want[2], keysOf(objs))
		}
		objs, _, _ = listAll(t, ops, s3.ListObjectsV2Input{Prefix: aws.String("default/orders/data/_kafka_partition=1/")}, 2)
		var part1 []string
		for _, f := range e.files {
			if f.partition == 1 {
				part1 = append(part1, f.key)
			}
		}
		slices.Sort(part1)
		if !slices.Equal(keysOf(objs), part1) {
			t.Errorf("partition 1's files: %q, want %q", keysOf(objs), part1)
		}
	})

	t.Run("delimiter", func(t *testing.T) {
		for _, c := range []struct {
			prefix string
			limit  int32
			want   []string
		}{
			{"", 0, []string{"default/", "sales/"}},
			{"", 1, []string{"default/", "sales/"}},
			{"default/", 0, []string{"default/orders/"}},
			{"default/orders/", 1, []string{"default/orders/data/", "default/orders/metadata/"}},
			{"default/orders/data/", 0, []string{"default/orders/data/_kafka_partition=0/", "default/orders/data/_kafka_partition=1/"}},
			{"nothing/", 0, nil},
		} {
			objs, got, _ := listAll(t, ops, s3.ListObjectsV2Input{Prefix: aws.String(c.prefix), Delimiter: aws.String("/")}, c.limit)
			if !slices.Equal(got, c.want) || len(objs) != 0 {
				t.Errorf("prefix %q by /: %q and %d objects, want %q", c.prefix, got, len(objs), c.want)
			}
		}
		objs, got, _ := listAll(t, ops, s3.ListObjectsV2Input{Prefix: aws.String("sales/refunds/metadata/"), Delimiter: aws.String("/")}, 1)
		if len(got) != 0 || !slices.Equal(keysOf(objs), refundsKeys) {
			t.Errorf("refunds' metadata by /: %q, %q", got, keysOf(objs))
		}
	})

	t.Run("every listed key reads as listed", func(t *testing.T) {
		for _, n := range nodes {
			cl := saClient(n, saKeys("ops", saOpsSecret, ""))
			for _, o := range all {
				key := aws.ToString(o.Key)
				head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: o.Key})
				if err != nil {
					t.Fatalf("HEAD %s via %s: %v", key, n.id, err)
				}
				if aws.ToInt64(head.ContentLength) != aws.ToInt64(o.Size) || aws.ToString(head.ETag) != aws.ToString(o.ETag) ||
					!aws.ToTime(head.LastModified).Equal(aws.ToTime(o.LastModified)) {
					t.Errorf("%s via %s: HEAD says %d %s %v, the listing %d %s %v", key, n.id, aws.ToInt64(head.ContentLength), aws.ToString(head.ETag),
						aws.ToTime(head.LastModified), aws.ToInt64(o.Size), aws.ToString(o.ETag), aws.ToTime(o.LastModified))
				}
				out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: o.Key})
				if err != nil {
					t.Fatalf("GET %s via %s: %v", key, n.id, err)
				}
				body, err := io.ReadAll(out.Body)
				out.Body.Close()
				if err != nil || int64(len(body)) != aws.ToInt64(o.Size) || aws.ToString(out.ETag) != aws.ToString(o.ETag) || o.StorageClass != types.ObjectStorageClassStandard {
					t.Errorf("GET %s via %s: %d bytes, ETag %s; listed %d, %s, %s (%v)", key, n.id, len(body), aws.ToString(out.ETag),
						aws.ToInt64(o.Size), aws.ToString(o.ETag), o.StorageClass, err)
				}
			}
		}
		// The live load's file is served, though not listed.
		if _, err := ops.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String(liveKey)}); err != nil {
			t.Errorf("the live load's file: %v", err)
		}
	})

	t.Run("encoding-type url", func(t *testing.T) {
		out, err := ops.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket, EncodingType: types.EncodingTypeUrl, Prefix: aws.String("default/orders/data/")})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range out.Contents {
			k := aws.ToString(o.Key)
			if strings.Contains(k, "=") {
				t.Errorf("%s: not URL-encoded", k)
			}
			d, err := url.QueryUnescape(k)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, d)
		}
		if wantData := keysOf(all)[:len(e.files)]; !slices.Equal(got, wantData) || out.EncodingType != types.EncodingTypeUrl {
			t.Errorf("decoded keys %q, want %q", got, wantData)
		}
	})

	t.Run("who may read what", func(t *testing.T) {
		etl, err := a.Secret("etl", saEtlSecret)
		if err != nil {
			t.Fatal(err)
		}
		vended, err := a.Vend(etl, ns, tableName)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name     string
			creds    aws.CredentialsProvider
			want     []string
			prefixes []string
		}{
			{"etl reads default.*", saKeys("etl", saEtlSecret, ""), ordersKeys, []string{"default/"}},
			{"sales reads sales.*", saKeys("sales", saSalesSecret, ""), refundsKeys, []string{"sales/"}},
			{"vended for default.orders", saVended(vended), ordersKeys, []string{"default/"}},
		} {
			cl := saClient(nodes[1], c.creds)
			objs, _, _ := listAll(t, cl, s3.ListObjectsV2Input{}, 2)
			if !slices.Equal(keysOf(objs), c.want) {
				t.Errorf("%s: lists %q, want %q", c.name, keysOf(objs), c.want)
			}
			_, ps, _ := listAll(t, cl, s3.ListObjectsV2Input{Delimiter: aws.String("/")}, 0)
			if !slices.Equal(ps, c.prefixes) {
				t.Errorf("%s: lists prefixes %q, want %q", c.name, ps, c.prefixes)
			}
			// Another table's prefix lists nothing, rather than its files.
			other := "sales/"
			if strings.HasPrefix(c.want[0], "sales/") {
				other = "default/"
			}
			if objs, _, _ := listAll(t, cl, s3.ListObjectsV2Input{Prefix: aws.String(other)}, 0); len(objs) != 0 {
				t.Errorf("%s: lists %q under %s", c.name, keysOf(objs), other)
			}
			out, err := cl.ListBuckets(ctx, &s3.ListBucketsInput{})
			if err != nil || len(out.Buckets) != 1 || aws.ToString(out.Buckets[0].Name) != layout.Bucket {
				t.Errorf("%s: ListBuckets %+v %v", c.name, out, err)
			}
		}
		anon := saClient(nodes[0], aws.AnonymousCredentials{})
		if _, err := anon.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket}); errCode(err) != "AccessDenied" {
			t.Errorf("unsigned listing: %v", err)
		}
		if _, err := anon.ListBuckets(ctx, &s3.ListBucketsInput{}); errCode(err) != "AccessDenied" {
			t.Errorf("unsigned ListBuckets: %v", err)
		}
	})

	t.Run("buckets", func(t *testing.T) {
		out, err := ops.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err != nil || len(out.Buckets) != 1 || aws.ToString(out.Buckets[0].Name) != layout.Bucket ||
			time.Since(aws.ToTime(out.Buckets[0].CreationDate)) > time.Hour || aws.ToString(out.Buckets[0].BucketRegion) != "us-east-1" {
			t.Fatalf("ListBuckets: %+v %v", out, err)
		}
		if out, err := ops.ListBuckets(ctx, &s3.ListBucketsInput{Prefix: aws.String("warehouse")}); err != nil || len(out.Buckets) != 0 {
			t.Errorf("ListBuckets by another prefix: %+v %v", out, err)
		}
		head, err := ops.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: bucket})
		if err != nil || aws.ToString(head.BucketRegion) != "us-east-1" {
			t.Errorf("HeadBucket: %+v %v", head, err)
		}
		if _, err := ops.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("warehouse")}); errStatus(err) != 404 {
			t.Errorf("HeadBucket of another bucket: %v", err)
		}
		if _, err := ops.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("warehouse")}); errCode(err) != "NoSuchBucket" {
			t.Errorf("listing another bucket: %v", err)
		}
		loc, err := ops.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: bucket})
		if err != nil || loc.LocationConstraint != "" {
			t.Errorf("GetBucketLocation: %+v %v", loc, err)
		}
	})

	t.Run("bad parameters", func(t *testing.T) {
		first, err := ops.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket, MaxKeys: aws.Int32(1)})
		if err != nil || !aws.ToBool(first.IsTruncated) {
			t.Fatalf("first page: %+v %v", first, err)
		}
		token := aws.ToString(first.NextContinuationToken)
		tampered := []byte(token)
		tampered[len(tampered)-3] ^= 2
		for _, c := range []struct {
			name  string
			in    s3.ListObjectsV2Input
			param string
		}{
			{"a made-up token", s3.ListObjectsV2Input{ContinuationToken: aws.String("bm90IGEgdG9rZW4")}, "continuation-token"},
			{"a tampered token", s3.ListObjectsV2Input{ContinuationToken: aws.String(string(tampered))}, "continuation-token"},
			{"a cut token", s3.ListObjectsV2Input{ContinuationToken: aws.String(token[:len(token)-4])}, "continuation-token"},
			{"negative max-keys", s3.ListObjectsV2Input{MaxKeys: aws.Int32(-1)}, "max-keys"},
			{"another encoding", s3.ListObjectsV2Input{EncodingType: "base64"}, "encoding-type"},
		} {
			c.in.Bucket = bucket
			_, err := ops.ListObjectsV2(ctx, &c.in)
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidArgument" || errStatus(err) != 400 || !strings.Contains(ae.ErrorMessage(), c.param) {
				t.Errorf("%s: %v, want 400 InvalidArgument naming %s", c.name, err, c.param)
			}
		}
		// The real token goes on where the first page ended.
		next, err := ops.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket, MaxKeys: aws.Int32(1), ContinuationToken: aws.String(token)})
		if err != nil || len(next.Contents) != 1 || aws.ToString(next.Contents[0].Key) != want[1] {
			t.Errorf("the second page: %+v %v", next, err)
		}
	})

	t.Run("ListObjects v1", func(t *testing.T) {
		var got []string
		var marker *string
		for pages := 0; ; pages++ {
			out, err := ops.ListObjects(ctx, &s3.ListObjectsInput{Bucket: bucket, MaxKeys: aws.Int32(4), Marker: marker})
			if err != nil || pages > 100 {
				t.Fatalf("ListObjects: %v", err)
			}
			for _, o := range out.Contents {
				got = append(got, aws.ToString(o.Key))
			}
			if !aws.ToBool(out.IsTruncated) {
				break
			}
			marker = out.NextMarker
		}
		if !slices.Equal(got, want) {
			t.Errorf("ListObjects by marker: %q", got)
		}
		out, err := ops.ListObjects(ctx, &s3.ListObjectsInput{Bucket: bucket, Delimiter: aws.String("/"), MaxKeys: aws.Int32(1)})
		if err != nil || !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextMarker) != "default/" {
			t.Fatalf("ListObjects by /: %+v %v", out, err)
		}
		out, err = ops.ListObjects(ctx, &s3.ListObjectsInput{Bucket: bucket, Delimiter: aws.String("/"), MaxKeys: aws.Int32(1), Marker: out.NextMarker})
		if err != nil || aws.ToBool(out.IsTruncated) || len(out.CommonPrefixes) != 1 || aws.ToString(out.CommonPrefixes[0].Prefix) != "sales/" {
			t.Errorf("ListObjects by / after default/: %+v %v", out, err)
		}
	})

	t.Run("ranges", func(t *testing.T) {
		f := e.files[0]
		size := int64(len(f.bytes))
		for _, n := range nodes {
			cl := saClient(n, saKeys("ops", saOpsSecret, ""))
			for _, rng := range []string{"bytes=5-2", "bytes=0-1,5-6", "items=0-5"} {
				out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(f.key), Range: aws.String(rng)})
				if err != nil {
					t.Fatalf("%s via %s: %v", rng, n.id, err)
				}
				body, _ := io.ReadAll(out.Body)
				out.Body.Close()
				if !bytes.Equal(body, f.bytes) || out.ContentRange != nil {
					t.Errorf("%s via %s: %d bytes, Content-Range %q; want the whole file", rng, n.id, len(body), aws.ToString(out.ContentRange))
				}
			}
			for _, c := range []struct{ rng, want string }{{"bytes=-8", "bytes %d-%d/%d"}, {"bytes=100-", "bytes %d-%d/%d"}} {
				out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(f.key), Range: aws.String(c.rng)})
				if err != nil {
					t.Fatalf("%s via %s: %v", c.rng, n.id, err)
				}
				body, _ := io.ReadAll(out.Body)
				out.Body.Close()
				first := size - 8
				if c.rng == "bytes=100-" {
					first = 100
				}
				if !bytes.Equal(body, f.bytes[first:]) || aws.ToString(out.ContentRange) != fmt.Sprintf(c.want, first, size-1, size) {
					t.Errorf("%s via %s: %d bytes, %q", c.rng, n.id, len(body), aws.ToString(out.ContentRange))
				}
			}
			_, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(f.key), Range: aws.String(fmt.Sprintf("bytes=%d-", size+1))})
			var re *smithyhttp.ResponseError
			if errCode(err) != "InvalidRange" || !errors.As(err, &re) || re.HTTPStatusCode() != 416 ||
				re.Response.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
				t.Errorf("a range past the end via %s: %v", n.id, err)
			}
		}
	})
}

func errCode(err error) string { code, _ := saCode(err); return code }
func errStatus(err error) int  { _, status := saCode(err); return status }
