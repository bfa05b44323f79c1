package node

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Without an exporter no span is recorded, yet a caller's trace goes on through the
// node to the nodes it calls; with one, spans are recorded and exported.
func TestTracesWithoutAnExporter(t *testing.T) {
	prop := propagation.TraceContext{}
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	in := prop.Extract(context.Background(), propagation.MapCarrier{"traceparent": parent})

	tp := newTracerProvider(resource.Empty(), nil)
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(in, "ReadFile")
	if span.IsRecording() {
		t.Error("a span is recorded with no exporter to send it to")
	}
	out := propagation.MapCarrier{}
	prop.Inject(ctx, out)
	if got := span.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("span's trace %s, want the caller's", got)
	}
	if out["traceparent"] == "" || out["traceparent"][3:35] != "4bf92f3577b34da6a3ce929d0e0e4736" || out["traceparent"] == parent {
		t.Errorf("traceparent sent on %q, want the caller's trace under a span of this node", out["traceparent"])
	}
	span.End()

	exp := tracetest.NewInMemoryExporter()
	tp2 := newTracerProvider(resource.Empty(), exp)
	_, span = tp2.Tracer("test").Start(in, "ReadFile")
	if !span.IsRecording() {
		t.Error("a span is not recorded although an exporter is set")
	}
	span.End()
	if err := tp2.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 1 {
		t.Errorf("%d spans exported, want 1", n)
	}
	tp2.Shutdown(context.Background())
}
