package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/minkhq/mink/test/cluster"
)

// checkGoS3 reads the data files with aws-sdk-go-v2's S3 client, signed (SigV4) as the
// reader: GET of each whole file, HEAD, ranges, and the listing of their folder.
func checkGoS3(t *testing.T, endpoint string, a *cluster.Auth, files []dataFile) {
	cl := s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint), UsePathStyle: true, Region: "us-east-1",
		Credentials:                credentials.NewStaticCredentialsProvider(a.Reader.ID, a.Reader.Secret, ""),
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, f := range files {
		bucket, key, err := s3Location(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			t.Fatalf("GET %s: %v", f.Path, err)
		}
		whole, err := io.ReadAll(obj.Body)
		obj.Body.Close()
		if err != nil || int64(len(whole)) != f.Size || !bytes.HasPrefix(whole, []byte("PAR1")) || !bytes.HasSuffix(whole, []byte("PAR1")) {
			t.Fatalf("GET %s: %d bytes (%v), the manifest says %d; want a Parquet file", f.Path, len(whole), err, f.Size)
		}
		head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		if err != nil || aws.ToInt64(head.ContentLength) != f.Size || aws.ToString(head.ETag) != aws.ToString(obj.ETag) {
			t.Errorf("HEAD %s: length %d, ETag %q (GET's %q): %v", f.Path, aws.ToInt64(head.ContentLength), aws.ToString(head.ETag), aws.ToString(obj.ETag), err)
		}
		// The footer as a Parquet reader asks for it: its last 8 bytes, then the metadata.
		part, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key, Range: aws.String("bytes=-8")})
		if err != nil {
			t.Fatalf("GET %s bytes=-8: %v", f.Path, err)
		}
		tail, _ := io.ReadAll(part.Body)
		part.Body.Close()
		if !bytes.Equal(tail, whole[len(whole)-8:]) || aws.ToString(part.ContentRange) != fmt.Sprintf("bytes %d-%d/%d", f.Size-8, f.Size-1, f.Size) {
			t.Errorf("GET %s bytes=-8: %x, Content-Range %q", f.Path, tail, aws.ToString(part.ContentRange))
		}
		mid := fmt.Sprintf("bytes=%d-%d", f.Size/3, f.Size/2)
		part, err = cl.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key, Range: &mid})
		if err != nil {
			t.Fatalf("GET %s %s: %v", f.Path, mid, err)
		}
		got, _ := io.ReadAll(part.Body)
		part.Body.Close()
		if !bytes.Equal(got, whole[f.Size/3:f.Size/2+1]) {
			t.Errorf("GET %s %s: %d bytes differ from the whole file's", f.Path, mid, len(got))
		}
	}

	// A missing key is NoSuchKey; the listing of the data folder names every file.
	bucket, key, _ := s3Location(files[0].Path)
	_, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(key + ".missing")})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "NoSuchKey" {
		t.Errorf("GET of a missing key: %v, want NoSuchKey", err)
	}
	prefix := key[:strings.LastIndexByte(key, '/')+1]
	listed := map[string]int64{}
	pages := s3.NewListObjectsV2Paginator(cl, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, MaxKeys: aws.Int32(2)})
	for n := 0; pages.HasMorePages() && n < 1000; n++ {
		page, err := pages.NextPage(ctx)
		if err != nil {
			var re interface{ HTTPStatusCode() int }
			if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotImplemented {
				t.Errorf("ListObjectsV2 of %s: 501 Not Implemented", prefix)
				return
			}
			t.Errorf("ListObjectsV2 of %s: %v", prefix, err)
			return
		}
		for _, o := range page.Contents {
			listed[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
		}
	}
	for _, f := range files {
		_, k, _ := s3Location(f.Path)
		if strings.HasPrefix(k, prefix) && listed[k] != f.Size {
			t.Errorf("ListObjectsV2 of %s: %s has size %d, want %d (listed %d keys)", prefix, k, listed[k], f.Size, len(listed))
		}
	}
}

// s3Location splits s3://bucket/key.
func s3Location(uri string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	bucket, key, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return "", "", fmt.Errorf("%q is no s3:// location", uri)
	}
	return bucket, key, nil
}
