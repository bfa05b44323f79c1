// Package history keeps a node's own figures of the last minutes, sampled every few
// seconds from its metrics registry (the one /metrics serves): what the console charts,
// with no Prometheus server. It keeps a fixed number of samples per series, so its
// memory is bounded by the series the node has (its tables) times the samples kept.
package history

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Defaults of a Ring: a sample every 5s for 15 minutes.
const (
	DefaultInterval = 5 * time.Second
	DefaultKeep     = 15 * time.Minute
)

// A Source makes one named series (one per table when ByTable) of the sum of a metric
// family's samples whose labels include Match: a counter's or gauge's value, or a
// histogram's count.
type Source struct {
	Name    string
	Family  string
	Match   map[string]string
	ByTable bool // one series per value of the "table" label
}

// Sources are what every node samples: what the console charts.
var Sources = []Source{
	{Name: "records_indexed", Family: "mink_indexer_records_total", ByTable: true},
	{Name: "lag_records", Family: "mink_indexer_lag", ByTable: true},
	{Name: "table_loads", Family: "http_server_request_duration_seconds", Match: map[string]string{"door": "catalog", "op": "load_table"}},
	{Name: "s3_gets", Family: "http_server_request_duration_seconds", Match: map[string]string{"door": "s3", "http_request_method": "GET"}},
}

// Series is one series' samples, oldest first.
type Series struct {
	Name, Table string
	Times       []time.Time
	Values      []float64
}

type key struct{ name, table string }

type series struct {
	times  []time.Time // a ring: next is the oldest once full
	values []float64
	next   int
	seen   time.Time // last sample that had it
}

// Ring samples a registry into a ring of samples per series.
type Ring struct {
	g        prometheus.Gatherer
	sources  []Source
	interval time.Duration
	size     int

	mu     sync.Mutex
	series map[key]*series
}

// New is a ring of g's families named by sources, sampled every interval and kept for
// keep (zero: the defaults).
func New(g prometheus.Gatherer, sources []Source, interval, keep time.Duration) *Ring {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Ring{g: g, sources: sources, interval: interval, size: max(2, int(keep/interval)), series: map[key]*series{}}
}

// Interval is how often the ring samples.
func (r *Ring) Interval() time.Duration { return r.interval }

// Run samples every interval until ctx ends.
func (r *Ring) Run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	r.Sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.Sample(now)
		}
	}
}

// Sample takes one sample of every source at now. A series the registry no longer has
// (a lease handed off) is dropped once the whole ring has passed since it was last seen.
func (r *Ring) Sample(now time.Time) {
	fams, _ := r.g.Gather() // what gathered is sampled even when a collector failed
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	sums := map[key]float64{}
	for _, src := range r.sources {
		f := byName[src.Family]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if !matches(labels, src.Match) {
				continue
			}
			k := key{name: src.Name}
			if src.ByTable {
				if k.table = labels["table"]; k.table == "" {
					continue
				}
			}
			sums[k] += value(m)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range sums {
		s := r.series[k]
		if s == nil {
			s = &series{times: make([]time.Time, 0, r.size), values: make([]float64, 0, r.size)}
			r.series[k] = s
		}
		s.seen = now
		if len(s.times) < r.size {
			s.times, s.values = append(s.times, now), append(s.values, v)
			continue
		}
		s.times[s.next], s.values[s.next] = now, v
		s.next = (s.next + 1) % r.size
	}
	for k, s := range r.series {
		if now.Sub(s.seen) > time.Duration(r.size)*r.interval {
			delete(r.series, k)
		}
	}
}

func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return math.NaN()
}

// Snapshot is every series, by name then table, its samples oldest first; keep says
// which tables' series a caller may see ("" for series of no table).
func (r *Ring) Snapshot(keep func(table string) bool) []Series {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Series
	for k, s := range r.series {
		if k.table != "" && !keep(k.table) {
			continue
		}
		n := len(s.times)
		o := Series{Name: k.name, Table: k.table, Times: make([]time.Time, 0, n), Values: make([]float64, 0, n)}
		for i := range n {
			j := (s.next + i) % n
			o.Times, o.Values = append(o.Times, s.times[j]), append(o.Values, s.values[j])
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Table < out[j].Table
	})
	return out
}
