package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/test/cluster"
)

// TestAuthRotationEndsTokens: real nodes, as an attacker who took a reader's token (and
// the S3 credentials vended with it) would find them after the reader's secret is
// rotated. Before: the token loads, vends, reads S3 and calls the admin API. Once the
// nodes have reloaded the auth config: the token, its vended credentials, the old secret
// (bearer, client credentials, SigV4 keys) are refused at the catalog, at S3 and at the
// admin API of every node; the token cannot be exchanged for a new one either. The new
// secret works everywhere.
func TestAuthRotationEndsTokens(t *testing.T) {
	c := cluster.New(t, cluster.WithAuth(), cluster.LeaseTTL(2*time.Second))
	c.Kafka.CreateTopic("events", 1, nil)
	c.Start("indexer", "idx-a")
	c.Start("writer", "wr-1")
	catalog := ctlFileServer(t, c, "fs-1")
	st, err := c.Member("fs-1").Admin().GetStatus(context.Background(), &adminv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s3URL := st.GetAddrs()["s3"]
	if _, err := c.Member("fs-1").Admin().CreateTable(context.Background(), &adminv1.CreateTableRequest{
		Name: "events", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON, Columns: []*adminv1.Column{{Name: "id", Type: "long"}},
		Properties: map[string]string{"mink.range.max-age": "200ms", "mink.commit.interval": "200ms"}}); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "events", Value: fmt.Appendf(nil, `{"id":%d}`, i)})
	}
	kafkatest.Produce(t, c.Kafka.Client(), recs...)

	reader, oldSecret := c.Auth.Reader.ID, c.Auth.Reader.Secret
	ctx := context.Background()
	s3As := func(key, secret, token string) *s3.Client {
		return s3.New(s3.Options{BaseEndpoint: aws.String(s3URL), UsePathStyle: true, Region: "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider(key, secret, token), RetryMaxAttempts: 1})
	}
	dataKey := waitFor(t, 60*time.Second, "a committed data file", func() (string, bool) {
		out, err := s3As(reader, oldSecret, "").ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("mink"), Prefix: aws.String("default/events/data/")})
		if err != nil || len(out.Contents) == 0 {
			return fmt.Sprint(err), false
		}
		return aws.ToString(out.Contents[0].Key), true
	})
	getObject := func(cl *s3.Client) error {
		out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("mink"), Key: aws.String(dataKey)})
		if err == nil {
			io.Copy(io.Discard, out.Body)
			out.Body.Close()
		}
		return err
	}
	s3Code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return fmt.Sprint(err)
	}

	token := func(id, secret string) (string, int) {
		resp, err := http.PostForm(catalog+"/v1/oauth/tokens", url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var tr struct {
			AccessToken string `json:"access_token"`
		}
		json.NewDecoder(resp.Body).Decode(&tr)
		return tr.AccessToken, resp.StatusCode
	}
	get := func(path, bearer string) (int, []byte) {
		req, _ := http.NewRequest("GET", catalog+path, nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	vended := func(bearer string) *s3.Client {
		code, body := get("/v1/namespaces/default/tables/events/credentials", bearer)
		var lc struct {
			Creds []struct {
				Config map[string]string `json:"config"`
			} `json:"storage-credentials"`
		}
		if err := json.Unmarshal(body, &lc); code != 200 || err != nil || len(lc.Creds) != 1 {
			t.Fatalf("vended credentials: %d %s", code, body)
		}
		cfg := lc.Creds[0].Config
		return s3As(cfg["s3.access-key-id"], cfg["s3.secret-access-key"], cfg["s3.session-token"])
	}
	adminAs := func(addr, bearer string) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		actx := metadata.AppendToOutgoingContext(ctx, auth.MetadataAuthorization, "Bearer "+bearer)
		_, err = adminv1.NewAdminServiceClient(conn).ListTables(actx, &adminv1.ListTablesRequest{})
		return err
	}
	nodes := []string{c.Member("fs-1").Addr(), c.Member("idx-a").Addr(), c.Member("wr-1").Addr()}

	// Before the rotation: the token does everything a reader may.
	tok, code := token(reader, oldSecret)
	if code != 200 {
		t.Fatalf("token: %d", code)
	}
	if code, body := get("/v1/namespaces/default/tables/events", tok); code != 200 {
		t.Fatalf("load with the token: %d %s", code, body)
	}
	stolen := vended(tok)
	if err := getObject(stolen); err != nil {
		t.Fatalf("S3 with the vended credentials: %v", err)
	}
	for _, a := range nodes {
		if err := adminAs(a, tok); err != nil {
			t.Fatalf("admin API at %s with the token: %v", a, err)
		}
	}

	// Rotate the reader's secret in the file every node watches.
	f, err := auth.LoadFile(c.Auth.Path)
	if err != nil {
		t.Fatal(err)
	}
	const newSecret = "reader-secret-after-the-rotation-0123"
	for i := range f.Principals {
		if f.Principals[i].ID == reader {
			f.Principals[i].Secret = newSecret
		}
	}
	if err := auth.WriteFile(c.Auth.Path, f); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "every node to reload the auth config", func() (string, bool) {
		if _, code := token(reader, newSecret); code != 200 {
			return "fs-1's catalog", false
		}
		for _, a := range nodes {
			if err := adminAs(a, newSecret); err != nil {
				return a, false
			}
		}
		return "", true
	})

	// After: nothing issued under the old secret opens any door.
	for _, p := range []string{"/v1/config", "/v1/namespaces/default/tables/events", "/v1/namespaces/default/tables/events/credentials"} {
		if code, body := get(p, tok); code != 401 || !strings.Contains(string(body), "secret changed") {
			t.Errorf("catalog GET %s with the old token: %d %s", p, code, body)
		}
		if code, _ := get(p, oldSecret); code != 401 {
			t.Errorf("catalog GET %s with the old secret: %d", p, code)
		}
	}
	if _, code := token(reader, oldSecret); code != 401 {
		t.Errorf("a token for the old secret: %d", code)
	}
	resp, err := http.PostForm(catalog+"/v1/oauth/tokens", url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token": {tok}, "subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("the old token exchanged: %d", resp.StatusCode)
	}
	if err := getObject(stolen); s3Code(err) != "InvalidToken" {
		t.Errorf("S3 with credentials vended before the rotation: %v", err)
	}
	if err := getObject(s3As(reader, oldSecret, "")); s3Code(err) != "SignatureDoesNotMatch" {
		t.Errorf("S3 signed with the old secret: %v", err)
	}
	for _, a := range nodes {
		for what, cred := range map[string]string{"token": tok, "secret": oldSecret} {
			if err := adminAs(a, cred); status.Code(err) != codes.Unauthenticated {
				t.Errorf("admin API at %s with the old %s: %v", a, what, err)
			}
		}
	}

	// The new secret works everywhere.
	fresh, code := token(reader, newSecret)
	if code != 200 {
		t.Fatalf("a token for the new secret: %d", code)
	}
	if err := getObject(vended(fresh)); err != nil {
		t.Errorf("S3 with credentials vended after the rotation: %v", err)
	}
	if err := getObject(s3As(reader, newSecret, "")); err != nil {
		t.Errorf("S3 signed with the new secret: %v", err)
	}
}
