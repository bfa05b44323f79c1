package console

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/apierr"
)

const (
	// fanout is how many nodes the console asks at once: a page of a hundred nodes
	// costs the browser one request, and this node a bounded few at a time.
	fanout = 8
	// FileServersPage is how many file servers one page of that view shows.
	FileServersPage = 25
	// chartTables is how many tables a chart draws: the busiest.
	chartTables = 8
)

// liveNodes are the live members, by id.
func (c *Console) liveNodes(ctx context.Context, s *sess) ([]*adminv1.Node, error) {
	m, err := c.invoke(ctx, s, "ListNodes", func(proto.Message) error { return nil })
	if err != nil {
		return nil, err
	}
	nodes := m.(*adminv1.ListNodesResponse).GetNodes()
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].GetNodeId() < nodes[j].GetNodeId() })
	return nodes, nil
}

// each calls fn for every node, fanout at a time, and waits for all.
func each(nodes []*adminv1.Node, fn func(i int, n *adminv1.Node)) {
	sem := make(chan struct{}, fanout)
	var wg sync.WaitGroup
	for i, n := range nodes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i, n)
		})
	}
	wg.Wait()
}

func hasRole(n *adminv1.Node, r adminv1.Role) bool { return slices.Contains(n.GetRoles(), r) }

type nodeStatus struct {
	Node   string          `json:"node"`
	Status json.RawMessage `json:"status,omitempty"`
	Error  *apiError       `json:"error,omitempty"`
}

type fileServersAnswer struct {
	Total int          `json:"total"`
	Page  int          `json:"page"`
	Size  int          `json:"size"`
	Nodes []nodeStatus `json:"nodes"`
}

// fileServers is one page of the live file servers, each with its GetStatus (asked of
// it through the admin API's forwarding): its cache and read figures.
func (c *Console) fileServers(w http.ResponseWriter, r *http.Request, s *sess) {
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 0)
	nodes, err := c.liveNodes(r.Context(), s)
	if err != nil {
		writeError(w, err)
		return
	}
	var fsNodes []*adminv1.Node
	for _, n := range nodes {
		if hasRole(n, adminv1.Role_ROLE_FILESERVER) {
			fsNodes = append(fsNodes, n)
		}
	}
	ans := fileServersAnswer{Total: len(fsNodes), Page: page, Size: FileServersPage, Nodes: []nodeStatus{}}
	lo := min(page*FileServersPage, len(fsNodes))
	fsNodes = fsNodes[lo:min(lo+FileServersPage, len(fsNodes))]
	ans.Nodes = make([]nodeStatus, len(fsNodes))
	each(fsNodes, func(i int, n *adminv1.Node) {
		ans.Nodes[i].Node = n.GetNodeId()
		st, err := c.invoke(r.Context(), s, "GetStatus", func(m proto.Message) error {
			m.(*adminv1.GetStatusRequest).Node = n.GetNodeId()
			return nil
		})
		if err != nil {
			e := status.Convert(apierr.GRPC(err))
			ans.Nodes[i].Error = &apiError{Code: e.Code().String(), Message: e.Message()}
			return
		}
		ans.Nodes[i].Status, _ = marshal.Marshal(st)
	})
	writeJSON(w, http.StatusOK, ans)
}

// chartsAnswer is every chart's series over one time axis (unix seconds): per table the
// records indexed per second and the lag in records, summed over the indexers; per file
// server its table loads and S3 GETs per second. null where no sample fell.
type chartsAnswer struct {
	Interval    float64                          `json:"interval"`
	Times       []int64                          `json:"times"`
	Tables      map[string]map[string][]*float64 `json:"tables"`
	FileServers map[string]map[string][]*float64 `json:"fileservers"`
	Errors      map[string]apiError              `json:"errors,omitempty"`
}

// charts asks every live node for its history (GetHistory, one call per node, fanout at
// a time) and puts the series on one time axis: counters as rates between samples, the
// lag as it is; the busiest tables only.
func (c *Console) charts(w http.ResponseWriter, r *http.Request, s *sess) {
	nodes, err := c.liveNodes(r.Context(), s)
	if err != nil {
		writeError(w, err)
		return
	}
	hist := make([]*adminv1.GetHistoryResponse, len(nodes))
	errs := make([]error, len(nodes))
	each(nodes, func(i int, n *adminv1.Node) {
		m, err := c.invoke(r.Context(), s, "GetHistory", func(m proto.Message) error {
			m.(*adminv1.GetHistoryRequest).Node = n.GetNodeId()
			return nil
		})
		if err != nil {
			errs[i] = err
			return
		}
		hist[i] = m.(*adminv1.GetHistoryResponse)
	})
	ans := chartsAnswer{Tables: map[string]map[string][]*float64{}, FileServers: map[string]map[string][]*float64{}}
	interval := 5 * time.Second
	for i, h := range hist {
		if errs[i] != nil {
			if ans.Errors == nil {
				ans.Errors = map[string]apiError{}
			}
			e := status.Convert(apierr.GRPC(errs[i]))
			ans.Errors[nodes[i].GetNodeId()] = apiError{Code: e.Code().String(), Message: e.Message()}
			continue
		}
		if d := h.GetInterval().AsDuration(); d > 0 {
			interval = d
		}
	}
	// The axis: the last 15 minutes in steps of the interval, ending now.
	step := int64(interval / time.Second)
	step = max(step, 1)
	end := time.Now().Unix() / step * step
	const span = 15 * 60
	n := int(span/step) + 1
	for i := range n {
		ans.Times = append(ans.Times, end-int64(n-1-i)*step)
	}
	bucket := func(t time.Time) (int, bool) {
		b := n - 1 - int((end-t.Unix()/step*step)/step)
		return b, b >= 0 && b < n
	}
	add := func(into map[string]map[string][]*float64, who, name string, b int, v float64) {
		if into[who] == nil {
			into[who] = map[string][]*float64{}
		}
		if into[who][name] == nil {
			into[who][name] = make([]*float64, n)
		}
		if p := into[who][name][b]; p != nil {
			v += *p
		}
		into[who][name][b] = &v
	}
	for i, h := range hist {
		if h == nil {
			continue
		}
		for _, sr := range h.GetSeries() {
			ts, vs := sr.GetTimes(), sr.GetValues()
			for j := range min(len(ts), len(vs)) {
				b, ok := bucket(ts[j].AsTime())
				if !ok {
					continue
				}
				switch sr.GetName() {
				case "lag_records":
					add(ans.Tables, sr.GetTable(), "lag", b, vs[j])
				case "records_indexed", "table_loads", "s3_gets":
					if j == 0 {
						continue
					}
					dt := ts[j].AsTime().Sub(ts[j-1].AsTime()).Seconds()
					dv := vs[j] - vs[j-1]
					if dt <= 0 || dv < 0 || math.IsNaN(dv) { // a restart set the counter back
						continue
					}
					if sr.GetName() == "records_indexed" {
						add(ans.Tables, sr.GetTable(), "rate", b, dv/dt)
					} else {
						add(ans.FileServers, nodes[i].GetNodeId(), sr.GetName(), b, dv/dt)
					}
				}
			}
		}
	}
	ans.Tables = busiest(ans.Tables, chartTables)
	ans.Interval = interval.Seconds()
	trimStart(&ans)
	writeJSON(w, http.StatusOK, ans)
}

// busiest keeps the k tables with the most records per second, then the most lag.
func busiest(tables map[string]map[string][]*float64, k int) map[string]map[string][]*float64 {
	if len(tables) <= k {
		return tables
	}
	type scored struct {
		name      string
		rate, lag float64
	}
	peak := func(vs []*float64) float64 {
		m := 0.0
		for _, v := range vs {
			if v != nil {
				m = max(m, *v)
			}
		}
		return m
	}
	var all []scored
	for name, s := range tables {
		all = append(all, scored{name, peak(s["rate"]), peak(s["lag"])})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].rate != all[j].rate {
			return all[i].rate > all[j].rate
		}
		if all[i].lag != all[j].lag {
			return all[i].lag > all[j].lag
		}
		return all[i].name < all[j].name
	})
	out := map[string]map[string][]*float64{}
	for _, s := range all[:k] {
		out[s.name] = tables[s.name]
	}
	return out
}

// trimStart drops the steps before the first sample of any series: a young cluster's
// charts span its life, not an empty quarter hour.
func trimStart(a *chartsAnswer) {
	first := len(a.Times) - 1
	for _, group := range []map[string]map[string][]*float64{a.Tables, a.FileServers} {
		for _, s := range group {
			for _, vs := range s {
				for i, v := range vs {
					if v != nil {
						first = min(first, i)
						break
					}
				}
			}
		}
	}
	first = max(first, 0)
	a.Times = a.Times[first:]
	for _, group := range []map[string]map[string][]*float64{a.Tables, a.FileServers} {
		for _, s := range group {
			for k, vs := range s {
				s[k] = vs[first:]
			}
		}
	}
}
