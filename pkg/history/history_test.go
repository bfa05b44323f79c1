package history_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/minkhq/mink/pkg/history"
)

// TestRingSamplesTheNodesMetrics: the ring reads the families the roles export through
// OpenTelemetry, under the names the Prometheus exporter gives them (an indexer's records
// and lag per table, summed over partitions; a file server's table loads and S3 GETs from
// its HTTP servers' metrics), keeps the newest samples in order once full, and shows a
// caller only the tables it may see.
func TestRingSamplesTheNodesMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(context.Background())
	m := mp.Meter("test")
	ctx := context.Background()
	records, _ := m.Int64Counter("mink.indexer.records", metric.WithUnit("{record}"))
	lag, _ := m.Int64ObservableGauge("mink.indexer.lag", metric.WithUnit("{record}"))
	var lagNow int64 = 7
	m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for p := range 2 {
			o.ObserveInt64(lag, lagNow, metric.WithAttributes(attribute.String("table", "default.a"), attribute.Int("partition", p)))
		}
		return nil
	}, lag)
	door := func(name string, attrs ...attribute.KeyValue) otelhttp.Option {
		//lint:ignore SA1019 as the file server's doors label their metrics (services/fileserver/internal/fileserver/server.go)
		return otelhttp.WithMetricAttributesFn(func(r *http.Request) []attribute.KeyValue {
			out := append([]attribute.KeyValue{attribute.String("door", name)}, attrs...)
			if name == "catalog" && r.URL.Path == "/v1/namespaces/default/tables/a" {
				out = append(out, attribute.String("op", "load_table"))
			}
			return out
		})
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	s3 := otelhttp.NewHandler(ok, "s3", otelhttp.WithMeterProvider(mp), door("s3"))
	cat := otelhttp.NewHandler(ok, "cat", otelhttp.WithMeterProvider(mp), door("catalog"))

	r := history.New(reg, history.Sources, time.Second, 3*time.Second)
	t0 := time.Unix(1000, 0)
	for i := range 5 {
		records.Add(ctx, 10, metric.WithAttributes(attribute.String("table", "default.a"), attribute.Int("partition", 0)))
		records.Add(ctx, 1, metric.WithAttributes(attribute.String("table", "secret.b"), attribute.Int("partition", 0)))
		s3.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/mink/x", nil))
		s3.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("HEAD", "/mink/x", nil))
		cat.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/namespaces/default/tables/a", nil))
		cat.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/config", nil))
		lagNow = int64(i)
		r.Sample(t0.Add(time.Duration(i) * time.Second))
	}
	got := map[string]history.Series{}
	for _, s := range r.Snapshot(func(table string) bool { return table == "default.a" }) {
		got[s.Name+"/"+s.Table] = s
	}
	if _, ok := got["records_indexed/secret.b"]; ok || len(got) != 4 {
		t.Fatalf("series: %v", got)
	}
	want := map[string][]float64{
		"records_indexed/default.a": {30, 40, 50}, "lag_records/default.a": {4, 6, 8},
		"table_loads/": {3, 4, 5}, "s3_gets/": {3, 4, 5},
	}
	for k, w := range want {
		s := got[k]
		if len(s.Values) != 3 || s.Values[0] != w[0] || s.Values[1] != w[1] || s.Values[2] != w[2] {
			t.Errorf("%s: %v, want %v", k, s.Values, w)
		}
		if len(s.Times) != 3 || !s.Times[0].Equal(t0.Add(2*time.Second)) || !s.Times[2].Equal(t0.Add(4*time.Second)) {
			t.Errorf("%s: times %v", k, s.Times)
		}
	}
}
