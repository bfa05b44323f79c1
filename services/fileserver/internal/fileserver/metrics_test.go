package fileserver_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/minkhq/mink/pkg/lease/leasetest"
)

// requests counts the HTTP requests n's metrics have, by the attributes named in attrs
// ("" for an attribute that must be absent).
func requests(t *testing.T, n *node, attrs map[string]string) uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := n.metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "http.server.request.duration" {
				continue
			}
		point:
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				for k, want := range attrs {
					got, ok := p.Attributes.Value(attribute.Key(k))
					if (want == "" && ok) || (want != "" && (!ok || got.String() != want)) {
						continue point
					}
				}
				total += p.Count
			}
		}
	}
	return total
}

// HTTP metrics say which door a request came through, and for the catalog which route
// it took, so a dashboard can tell table loads and S3 reads (and their 503s) apart.
func TestHTTPMetricsNameDoorAndRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	n := e.startNodes(1)[0]
	load := map[string]string{"door": "catalog", "http.route": "/v1/namespaces/{namespace}/tables/{table}", "http.response.status_code": "200"}
	missing := map[string]string{"door": "catalog", "http.route": "/v1/namespaces/{namespace}/tables/{table}", "http.response.status_code": "404"}
	config := map[string]string{"door": "catalog", "http.route": "/v1/config"}
	object := map[string]string{"door": "s3", "http.request.method": "GET", "http.route": "", "http.response.status_code": "200"}
	for _, a := range []map[string]string{load, missing, config, object} {
		if c := requests(t, n, a); c != 0 {
			t.Fatalf("%d requests %v before any", c, a)
		}
	}
	if resp, _ := get(t, "GET", n.catalog+"/v1/namespaces/default/tables/orders", nil); resp.StatusCode != 200 {
		t.Fatalf("load: %d", resp.StatusCode)
	}
	if resp, _ := get(t, "GET", n.catalog+"/v1/namespaces/default/tables/nope", nil); resp.StatusCode != 404 {
		t.Fatalf("load of a missing table: %d", resp.StatusCode)
	}
	if resp, _ := get(t, "GET", n.catalog+"/v1/config", nil); resp.StatusCode != 200 {
		t.Fatalf("config: %d", resp.StatusCode)
	}
	for range 2 {
		if resp, _ := get(t, "GET", objectURL(n, e.files[0].key), nil); resp.StatusCode != 200 {
			t.Fatalf("S3 GET: %d", resp.StatusCode)
		}
	}
	// otelhttp records a request once its handler has returned, which may be just after
	// the client has read the answer.
	leasetest.Eventually(t, 5*time.Second, "every request counted, by door and route", func() bool {
		return requests(t, n, load) == 1 && requests(t, n, missing) == 1 && requests(t, n, config) == 1 && requests(t, n, object) == 2
	})
}
