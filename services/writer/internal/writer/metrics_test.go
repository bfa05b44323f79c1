package writer

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/minkhq/mink/pkg/lease/leasetest"
)

// points are a reader's data points of one metric whose attributes include attrs: their
// values (int64 sums and gauges) or counts (histograms).
func points(t *testing.T, r *sdkmetric.ManualReader, name string, attrs map[string]string) []int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	match := func(set attribute.Set) bool {
		for k, v := range attrs {
			if got, ok := set.Value(attribute.Key(k)); !ok || got.String() != v {
				return false
			}
		}
		return true
	}
	var out []int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						out = append(out, p.Value)
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						out = append(out, p.Value)
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						out = append(out, int64(p.Count))
					}
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	return out
}

// The writer's figures: committed records from zero at the lease's start (before any
// commit), commit durations by operation, and the snapshot lag of the tables it holds
// now, gone with the lease.
func TestMetricsFollowTheLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2, nil)
	r := sdkmetric.NewManualReader()
	w, err := New(Options{DB: f.db, Kafka: f.src, Logger: slog.New(slog.NewTextHandler(testLog{f.t}, nil)),
		Meter: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)).Meter("test")})
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]string{"table": "default.events"}
	stop, _ := f.run(w, f.take("writer", -1, "w1"))
	leasetest.Eventually(t, 10*time.Second, "the first metadata, committed as create", func() bool {
		return len(points(t, r, "mink.writer.commit.duration", map[string]string{"table": "default.events", "operation": "create", "result": "ok"})) == 1
	})
	if got := points(t, r, "mink.writer.records_committed", table); len(got) != 1 || got[0] != 0 {
		t.Fatalf("records committed before any range: %v, want one series at 0", got)
	}

	f.produce(0, 20)
	f.produce(1, 5)
	f.index(0, 7)
	f.index(1, 5)
	f.waitCovered()
	leasetest.Eventually(t, 10*time.Second, "25 records committed, nothing left to commit", func() bool {
		rec, lag := points(t, r, "mink.writer.records_committed", table), points(t, r, "mink.writer.snapshot_lag", table)
		return len(rec) == 1 && rec[0] == 25 && len(lag) == 1 && lag[0] == 0
	})
	appends := points(t, r, "mink.writer.commit.duration", map[string]string{"table": "default.events", "operation": "append", "result": "ok"})
	if len(appends) != 1 || appends[0] < 1 {
		t.Fatalf("append commit durations: %v, want one series of at least one commit", appends)
	}
	stop()
	if lag := points(t, r, "mink.writer.snapshot_lag", nil); len(lag) != 0 {
		t.Fatalf("the writer holds no lease and still reports a snapshot lag: %v", lag)
	}
}
