package catalog

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/minkhq/mink/pkg/layout"
)

// TestLoadTableResult: the envelope written around the stored metadata bytes is the
// JSON that encoding/json made of the LoadTableResult (which compacts the metadata and
// escapes <, > and & in it: the same values).
func TestLoadTableResult(t *testing.T) {
	fileIO := S3Config("http://fs-1:9000", "us-east-1")
	c := &catalog{o: Options{FileIO: fileIO}}
	var err error
	if c.fileIO, err = json.Marshal(fileIO); err != nil {
		t.Fatal(err)
	}
	key := `ns/t "q"/metadata/00002-x.metadata.json`
	for _, metadata := range []string{
		`{"format-version":2,"table-uuid":"u","snapshots":[{"summary":{"a":"<b>&"}}]}`,
		"\n  { \"format-version\" : 2 }\n",
	} {
		got, err := c.loadTableResult(key, []byte(metadata), c.fileIO, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(struct {
			MetadataLocation string            `json:"metadata-location"`
			Metadata         json.RawMessage   `json:"metadata"`
			Config           map[string]string `json:"config"`
		}{layout.URI(key), json.RawMessage(metadata), fileIO})
		if err != nil {
			t.Fatal(err)
		}
		var gotV, wantV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatalf("not JSON: %v: %s", err, got)
		}
		if err := json.Unmarshal(want, &wantV); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotV, wantV) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	for _, bad := range []string{"", "[1]", "{", "null"} {
		if _, err := c.loadTableResult(key, []byte(bad), c.fileIO, nil); err == nil {
			t.Errorf("metadata %q was served", bad)
		}
	}
	// With storage credentials.
	creds := []StorageCredential{{Prefix: "s3://mink/ns/t/", Config: map[string]string{"s3.session-token": `a"b`}}}
	credsJSON, _ := json.Marshal(creds)
	got, err := c.loadTableResult(key, []byte(`{"format-version":2}`), []byte(`{"k":"v"}`), credsJSON)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Config map[string]string   `json:"config"`
		Creds  []StorageCredential `json:"storage-credentials"`
	}
	if err := json.Unmarshal(got, &res); err != nil || res.Config["k"] != "v" || !reflect.DeepEqual(res.Creds, creds) {
		t.Errorf("with credentials: %s (%v)", got, err)
	}
}
