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

	"github.com/minkhq/mink/pkg/await"
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
// mink.live.reuse-ms: a burst of D writes at most ceil(D / spacing) + 1 load snapshots
// (spacing: 3/4 of the bound, as loads refresh ahead),
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
	props := tables.DefaultProps
	props.LiveReuse = bound
	most := int(math.Ceil(float64(took)/float64(props.LiveSnapshotSpacing()))) + 1 // loads refresh ahead
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

// A load that finds the newest load snapshot in the last quarter of the reuse bound
// answers with it and begins the next one without waiting for it (refresh ahead); a
// load after the newest has expired finds that one made, with every record Kafka
// acknowledged before it began, and builds nothing itself.
func TestLiveLoadRefreshAhead(t *testing.T) {
	t.Parallel()
	const bound = 8 * time.Second // long, so that a slow machine still lands each load in its part of it
	props := tables.DefaultProps
	props.LiveReuse = bound
	ahead := props.LiveRefreshAhead()
	le := newLiveEnv(t, map[string]string{tables.PropLiveReuseMs: strconv.FormatInt(bound.Milliseconds(), 10)}, false)
	n := le.startNodes(1)[0]
	le.produce(20)
	load := func() rawLoad {
		t.Helper()
		r, err := loadRaw(le.ctx, http.DefaultClient, le.loadURL(n))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t0 := time.Now()
	first := load() // its offsets were read between t0 and now
	t1 := time.Now()
	le.produce(5) // acknowledged after the first snapshot's offsets: not in it
	if r := load(); r.location != first.location || n.srv.LiveStats().Ahead != 0 {
		t.Fatalf("a load early in the bound: %s, %+v; want the first snapshot %s and nothing begun", r.location, n.srv.LiveStats(), first.location)
	}

	// In the last quarter: the first snapshot's age is at least bound - ahead after
	// t1 + bound - ahead, and below the bound until t0 + bound.
	<-time.After(time.Until(t1.Add(bound - ahead + 50*time.Millisecond)))
	r := load()
	if time.Since(t0) >= bound {
		t.Fatalf("the machine is too slow for this test: %v from the first load to the end of the second", time.Since(t0))
	}
	if r.location != first.location {
		t.Fatalf("a load in the last quarter of the bound answered %s, want the newest %s", r.location, first.location)
	}
	if st := n.srv.LiveStats(); st.Ahead != 1 {
		t.Fatalf("a load in the last quarter of the bound: %+v, want one refresh begun ahead", st)
	}
	await.True(t, 30*time.Second, "the refresh begun ahead to make a load snapshot", func() bool { return n.srv.LiveStats().Loads == 2 })
	if got := le.loadSnapshots(); got != 2 {
		t.Fatalf("%d load snapshots recorded, want 2", got)
	}

	// After the first expired: the one made ahead, with the 5 records more, nothing built.
	<-time.After(time.Until(t1.Add(bound + 50*time.Millisecond)))
	before := n.srv.LiveStats()
	last := load()
	after := n.srv.LiveStats()
	if last.location == first.location || after.Loads != before.Loads || after.Reused != before.Reused+1 {
		t.Fatalf("a load after the first snapshot expired: %s (first %s), stats %+v then %+v; want the snapshot made ahead, reused", last.location, first.location, before, after)
	}
	for p := range int32(livePartitions) {
		if first.offset(p, live.SuffixTailEnd) != 20 || last.offset(p, live.SuffixTailEnd) != 25 {
			t.Fatalf("partition %d: tail ends %d then %d, want 20 then 25", p, first.offset(p, live.SuffixTailEnd), last.offset(p, live.SuffixTailEnd))
		}
	}
	if got := le.loadSnapshots(); got != 2 {
		t.Fatalf("%d load snapshots recorded, want 2", got)
	}
	sameRows(t, "the snapshot made ahead", le.mustScan(n).rows, le.rows)
}
