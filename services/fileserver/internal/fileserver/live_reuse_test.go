package fileserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/fileserver/internal/live"
)

// liveRows counts what live loads wrote: load metadata files and tail data file rows.
func (le *liveEnv) liveRows() (meta, data int) {
	le.t.Helper()
	err := le.db.QueryRow(le.ctx, `SELECT (SELECT count(*) FROM mink_meta_files WHERE table_id = $1 AND expires_at IS NOT NULL),
		(SELECT count(*) FROM mink_data_files WHERE table_id = $1 AND live)`, le.table.ID).Scan(&meta, &data)
	if err != nil {
		le.t.Fatal(err)
	}
	return meta, data
}

// loadSnapshots counts the load snapshots recorded (their metadata JSON rows).
func (le *liveEnv) loadSnapshots() int {
	le.t.Helper()
	var n int
	if err := le.db.QueryRow(le.ctx, `SELECT count(*) FROM mink_meta_files WHERE table_id = $1 AND load_stream IS NOT NULL`,
		le.table.ID).Scan(&n); err != nil {
		le.t.Fatal(err)
	}
	return n
}

// rawLoad is one load through the REST catalog, read as a client sees it.
type rawLoad struct {
	location string
	summary  map[string]string // the current snapshot's
}

func (r rawLoad) offset(p int32, suffix string) int64 {
	n, err := strconv.ParseInt(r.summary[live.PartitionKey(p, suffix)], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func loadRaw(ctx context.Context, client *http.Client, url string) (rawLoad, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return rawLoad{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return rawLoad{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return rawLoad{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return rawLoad{}, fmt.Errorf("load: %s: %s", resp.Status, body)
	}
	var out struct {
		Location string `json:"metadata-location"`
		Metadata struct {
			Current   *int64 `json:"current-snapshot-id"`
			Snapshots []struct {
				ID      int64             `json:"snapshot-id"`
				Summary map[string]string `json:"summary"`
			} `json:"snapshots"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return rawLoad{}, err
	}
	r := rawLoad{location: out.Location}
	for _, s := range out.Metadata.Snapshots {
		if out.Metadata.Current != nil && s.ID == *out.Metadata.Current {
			r.summary = s.Summary
		}
	}
	return r, nil
}

// burst runs n concurrent loads spread over nodes and returns their metadata locations.
func (le *liveEnv) burst(n int, nodes ...*node) map[string]int {
	le.t.Helper()
	var mu sync.Mutex
	locs := map[string]int{}
	var wg sync.WaitGroup
	for i := range n {
		nd := nodes[i%len(nodes)]
		wg.Go(func() {
			r, err := loadRaw(le.ctx, http.DefaultClient, le.loadURL(nd))
			if err != nil {
				le.t.Error(err)
				return
			}
			mu.Lock()
			locs[r.location]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return locs
}

// A burst of identical loads writes one load snapshot: its three metadata files and
// one tail file per partition. Loads of the same tail later, through any node, also one
// that has never loaded the table, and after the reuse bound has passed, write nothing:
// they find it by its content key.
func TestLiveLoadIdenticalLoadsWriteOnce(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, nil, false)
	nodes := le.startNodes(3)
	le.produce(200)
	meta0, data0 := le.liveRows()
	if meta0 != 0 || data0 != 0 {
		t.Fatalf("before any load: %d load metadata rows, %d tail rows", meta0, data0)
	}
	locs := le.burst(64, nodes[0], nodes[1])
	meta1, data1 := le.liveRows()
	if len(locs) != 1 || meta1 != 3 || data1 != livePartitions || le.loadSnapshots() != 1 {
		t.Fatalf("64 identical loads: snapshots %v; %d load metadata rows, %d tail rows, want 1 snapshot, 3 and %d", locs, meta1, data1, livePartitions)
	}
	// Past the reuse bound (100ms by default), nothing produced: the same snapshot.
	past := time.Now().Add(2 * tables.DefaultProps.LiveReuse)
	<-time.After(time.Until(past))
	again := le.burst(64, nodes...)
	meta2, data2 := le.liveRows()
	if len(again) != 1 || meta2 != meta1 || data2 != data1 {
		t.Fatalf("64 more loads of the same tail (one node new to it): snapshots %v; %d load metadata rows, %d tail rows; want the first's and no row written",
			again, meta2, data2)
	}
	for loc := range again {
		if locs[loc] == 0 {
			t.Errorf("the second burst answered %s, not the first's snapshot %v", loc, locs)
		}
	}
	if st := nodes[2].srv.LiveStats(); st.Loads != 0 || st.Found == 0 {
		t.Errorf("the node new to the table: %+v, want no snapshot made and one found in Postgres", st)
	}
	sameRows(t, "after the bursts", le.mustScan(nodes[2]).rows, le.rows)
}

// While producers keep the tail moving, loads reuse the newest load snapshot for
// mink.live.reuse-ms: a burst of D writes at most ceil(D / bound) + 1 load snapshots,
// each with at most one new tail file per partition. Every load is exact (its tail
// files hold every record up to its tail end, no more), and fresh: a load that began at
// T has every record whose produce Kafka acknowledged before T - bound.
func TestLiveLoadReuseBound(t *testing.T) {
	t.Parallel()
	const bound = 250 * time.Millisecond
	le := newLiveEnv(t, map[string]string{tables.PropLiveReuseMs: strconv.FormatInt(bound.Milliseconds(), 10)}, false)
	n := le.startNodes(1)[0]
	le.produce(20)
	if _, err := loadRaw(le.ctx, http.DefaultClient, le.loadURL(n)); err != nil { // the first tail files, before timing
		t.Fatal(err)
	}
	snaps0 := le.loadSnapshots()
	_, data0 := le.liveRows()

	type acked struct {
		p   int32
		off int64
		at  time.Time
	}
	var (
		mu    sync.Mutex
		acks  []acked
		loads []struct {
			began time.Time
			r     rawLoad
		}
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	began := time.Now()
	wg.Go(func() { // the producer: one record per partition every few milliseconds
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := int32(i % livePartitions)
			mu.Lock()
			id := le.nextID
			le.nextID++
			mu.Unlock()
			res := le.prod.ProduceSync(le.ctx, &kgo.Record{Topic: le.name, Partition: p, Key: fmt.Appendf(nil, "u-%d", id),
				Value: fmt.Appendf(nil, `{"id": %d, "msg": "click %d"}`, id, id)})
			r, err := res.First()
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			acks = append(acks, acked{r.Partition, r.Offset, time.Now()})
			le.rows = append(le.rows, row{r.Partition, r.Offset, id, fmt.Sprintf("click %d", id)})
			mu.Unlock()
			<-time.After(2 * time.Millisecond)
		}
	})
	const clients, duration = 16, 2 * time.Second
	var lwg sync.WaitGroup
	for range clients {
		lwg.Go(func() {
			client := &http.Client{}
			defer client.CloseIdleConnections()
			for time.Since(began) < duration {
				t0 := time.Now()
				r, err := loadRaw(le.ctx, client, le.loadURL(n))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				loads = append(loads, struct {
					began time.Time
					r     rawLoad
				}{t0, r})
				mu.Unlock()
			}
		})
	}
	lwg.Wait()
	took := time.Since(began)
	close(stop)
	wg.Wait()
	sortRows(le.rows)

	snaps := le.loadSnapshots() - snaps0
	_, data := le.liveRows()
	most := int(math.Ceil(float64(took)/float64(bound))) + 1
	t.Logf("%d loads in %v: %d load snapshots (at most %d), %d tail file rows", len(loads), took.Round(time.Millisecond), snaps, most, data-data0)
	if snaps > most || snaps < 2 {
		t.Errorf("%d loads over %v with a %v bound wrote %d load snapshots, want 2 to %d", len(loads), took, bound, snaps, most)
	}
	if data-data0 > snaps*livePartitions {
		t.Errorf("%d new tail file rows for %d load snapshots, want at most one per partition each", data-data0, snaps)
	}
	for _, l := range loads {
		var records int64
		for p := range int32(livePartitions) {
			start, end := l.r.offset(p, live.SuffixTailStart), l.r.offset(p, live.SuffixTailEnd)
			if start != 0 || end < 20 {
				t.Fatalf("load %s: partition %d tail [%d, %d), want from 0 past the first 20", l.r.location, p, start, end)
			}
			records += end - start
			for _, a := range acks {
				if a.p == p && a.at.Before(l.began.Add(-bound)) && a.off >= end {
					t.Fatalf("a load that began %v after the start ends partition %d at %d, but offset %d was acknowledged %v before it began (bound %v)",
						l.began.Sub(began), p, end, a.off, l.began.Sub(a.at), bound)
				}
			}
		}
		if got := l.r.summary[live.SummaryTailRecords]; got != strconv.FormatInt(records, 10) {
			t.Fatalf("load %s: %s tail rows, want %d: every record up to its tail ends", l.r.location, got, records)
		}
	}
	// Once the bound has passed, a load has every record.
	<-time.After(bound)
	sameRows(t, "after the producer stopped", le.mustScan(n).rows, le.rows)
}
