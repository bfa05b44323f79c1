package files

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/tablecodec"
)

// commitRange plays indexer and writer for offsets [start, end) of the env's table: it
// builds the file once to measure it and records it as a commit does. It returns its key.
func (e *measureEnv) commitRange(start, end int64) string {
	e.t.Helper()
	s := e.stores[firstID(e)]
	settings := parquetbuild.DefaultSettings()
	settingsJSON, _ := json.Marshal(settings)
	var buf bytes.Buffer
	fs, err := rangefile.BuildOffsets(e.ctx, s.o.Kafka, tablecodec.New(e.db, nil), e.table, settings, 0, start, end, &buf)
	if err != nil {
		e.t.Fatal(err)
	}
	key := layout.DataKey(e.table.Namespace, e.table.Name, 0, start, end, fs.SHA256)
	if e.files == nil {
		e.files = map[string][]byte{}
	}
	e.files[key] = buf.Bytes()
	stats, _ := json.Marshal(fs.Columns)
	if _, err := e.db.Exec(e.ctx, `INSERT INTO mink_data_files
		(table_id, key, partition, start_offset, end_offset, record_count, file_size, sha256, settings, stats)
		VALUES ($1, $2, 0, $3, $4, $5, $6, $7, $8, $9)`,
		e.table.ID, key, start, end, fs.RowCount, fs.Size, fs.SHA256, settingsJSON, stats); err != nil {
		e.t.Fatal(err)
	}
	return key
}

func firstID(e *measureEnv) string {
	for id := range e.stores {
		return id
	}
	return ""
}

// TestWarmAfterCommit: a running store builds a file committed after it started into
// its cache within a few warming intervals, without any read; the read that follows is
// a cache hit.
func TestWarmAfterCommit(t *testing.T) {
	e := newMeasureEnv(t, "fs-1")
	s := e.stores["fs-1"]
	s.o.WarmInterval = time.Hour // so only the commit's notification can prompt the look that finds it
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	await.True(t, 10*time.Second, "the warmer to listen and make its first looks", func() bool {
		w := s.WarmStats()
		return w.Listening && w.Looks >= 2 // the start's, and the one listening prompts
	})
	key := e.commitRange(0, 5)
	committed := time.Now()
	// The build counts itself warmed just after its file is in the cache: both are waited for.
	await.For(t, 5*time.Second, key+" in the owner's cache after its commit (warm interval an hour); warm stats", func() (WarmStats, bool) {
		w := s.WarmStats()
		return w, s.o.Cache.Contains(key) && w.Warmed == 1
	})
	t.Logf("warmed %v after the commit", time.Since(committed))
	if st := s.Stats(); st.CacheMisses != 0 || st.CacheHits != 0 {
		t.Fatalf("warming counted as reads: %+v", st)
	}
	obj, err := s.Open(ctx, key, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	if !obj.CacheHit {
		t.Fatal("the first read of a warmed file was not a cache hit")
	}
	if _, err := io.Copy(io.Discard, obj.Body); err != nil {
		t.Fatal(err)
	}
	// The third look (the commit's notification) found it; the build's end made one more.
	if w := s.WarmStats(); w.Warmed != 1 || w.Looks < 3 {
		t.Fatalf("warm stats %+v, want 1 warmed from the third look on", w)
	}
}

// TestWarmSkips: a node serving WarmBusyReads reads builds nothing until they end; a
// cache past WarmCacheShare gets nothing; files are warmed newest first.
func TestWarmSkips(t *testing.T) {
	t.Parallel()
	e := newMeasureEnv(t, "fs-1")
	older, newer := e.commitRange(0, 5), e.commitRange(5, 10)
	own := e.stores["fs-1"]

	// Full: nothing is built, and the files are dropped from the queue.
	share := own.o.WarmCacheShare
	own.o.WarmCacheShare = 1e-9
	w := own.newWarmer()
	own.warmRound(e.ctx, w)
	w.wait()
	own.o.WarmCacheShare = share
	if own.o.Cache.Contains(older) || own.o.Cache.Contains(newer) || own.WarmStats().SkippedFull != 2 || len(w.queue) != 0 {
		t.Fatalf("a full cache warmed: stats %+v, queue %d", own.WarmStats(), len(w.queue))
	}

	// Busy: reads in flight hold the queue; once they end, the newest is built first.
	var held []*Object
	for range own.o.WarmBusyReads {
		obj, err := own.openLocal(e.ctx, older, nil, true) // any read: its count is what matters
		if err != nil {
			t.Fatal(err)
		}
		own.inflight.Add(1)
		obj, _ = own.track(obj, nil)
		held = append(held, obj)
	}
	own.o.Cache.Remove(older) // openLocal built it
	w = own.newWarmer()
	own.warmRound(e.ctx, w)
	w.wait()
	if own.o.Cache.Contains(older) || own.o.Cache.Contains(newer) || own.WarmStats().SkippedBusy != 1 {
		t.Fatalf("a busy node warmed: stats %+v", own.WarmStats())
	}
	if len(w.queue) != 2 || w.queue[0].Key != newer {
		t.Fatalf("queue %+v, want the newer file first", w.queue)
	}
	for _, obj := range held {
		obj.Close()
		obj.Close() // closing twice counts once
	}
	if n := own.inflight.Load(); n != 0 {
		t.Fatalf("%d reads counted in flight after all closed", n)
	}
	warmAll(e.ctx, own, w)
	if !own.o.Cache.Contains(older) || !own.o.Cache.Contains(newer) || own.WarmStats().Warmed != 2 {
		t.Fatalf("an idle node did not warm its queue: stats %+v", own.WarmStats())
	}
}

// TestWarmOwnFilesOnly: each node warms the files it owns and leaves the others to
// their owners.
func TestWarmOwnFilesOnly(t *testing.T) {
	t.Parallel()
	e := newMeasureEnv(t, "fs-1", "fs-2")
	var keys []string
	for i := range int64(5) {
		keys = append(keys, e.commitRange(2*i, 2*i+2))
	}
	owned := map[string]int{}
	for id, s := range e.stores {
		warmAll(e.ctx, s, s.newWarmer())
		for _, k := range keys {
			if s.members.owns(k) {
				owned[id]++
			}
			if s.members.owns(k) != s.o.Cache.Contains(k) {
				t.Fatalf("%s: owns %s %v, cached %v", id, k, s.members.owns(k), s.o.Cache.Contains(k))
			}
		}
	}
	if len(owned) != 2 {
		t.Fatalf("the files should be owned by both nodes: %v", owned)
	}
}

// warmAll runs warming rounds until w's queue is empty and its builds have ended, as
// the warm loop does when builds end.
func warmAll(ctx context.Context, s *Store, w *warmer) {
	for {
		s.warmRound(ctx, w)
		w.wait()
		if len(w.queue) == 0 {
			return
		}
	}
}

// TestWarmBuildsAtOnce: warming builds up to WarmBuilds files at once, the newest
// first, and starts the next as soon as one ends.
func TestWarmBuildsAtOnce(t *testing.T) {
	e := newMeasureEnv(t, "fs-1")
	s := e.stores["fs-1"]
	setBuildCap(s, 4)
	s.o.WarmBuilds = 2
	var keys []string // oldest first
	for i := range int64(5) {
		keys = append(keys, e.commitRange(2*i, 2*i+2))
	}
	// The first two builds wait at gate, the next two at gate2: a build begins only
	// when one of the two slots frees, so the order they record is the order they were
	// taken from the queue (a build let through at once could finish and start the next
	// before its neighbour recorded itself).
	gate, open := newGate(t)
	gate2, open2 := newGate(t)
	var mu sync.Mutex
	var order []string
	s.slotTaken = func(what string) {
		mu.Lock()
		order = append(order, what)
		n := len(order)
		mu.Unlock()
		switch {
		case n <= 2:
			<-gate
		case n <= 4:
			<-gate2
		}
	}
	w := s.newWarmer()
	s.warmRound(e.ctx, w)
	await.True(t, 10*time.Second, "two warm builds", func() bool { return s.BuildStats().Running == 2 })
	s.warmRound(e.ctx, w) // a look while both run starts nothing more
	mu.Lock()
	if len(order) != 2 || len(w.queue) != 3 {
		t.Fatalf("started %v with %d queued, want 2 started and 3 queued", order, len(w.queue))
	}
	if !(order[0] == keys[4] && order[1] == keys[3] || order[0] == keys[3] && order[1] == keys[4]) {
		t.Fatalf("started %v first, want the two newest %v", order, keys[3:])
	}
	mu.Unlock()
	open()
	await.True(t, 10*time.Second, "the next two warm builds", func() bool {
		s.warmRound(e.ctx, w) // starts what the freed slots allow
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 4
	})
	open2()
	warmAll(e.ctx, s, w)
	for _, k := range keys {
		if !s.o.Cache.Contains(k) {
			t.Fatalf("%s not warmed", k)
		}
	}
	if b, ws := s.BuildStats(), s.WarmStats(); b.Peak != 2 || ws.Warmed != 5 {
		t.Fatalf("build stats %+v, warm stats %+v: want at most 2 at once, 5 warmed", b, ws)
	}
	// Two at a time, newest first: the next two started together, then the oldest.
	if !(order[2] == keys[2] && order[3] == keys[1] || order[2] == keys[1] && order[3] == keys[2]) || order[4] != keys[0] {
		t.Fatalf("warmed in the order %v, want newest first", order)
	}
}

// TestWarmManifests: the manifest list and manifests a commit records are warmed with its
// data files, ahead of them (a scan reads them first), and served as Postgres holds them;
// its metadata JSON (the catalog serves it) and a load snapshot's files (they expire) are
// not warmed.
func TestWarmManifests(t *testing.T) {
	t.Parallel()
	e := newMeasureEnv(t, "fs-1")
	own := e.stores["fs-1"]
	data := e.commitRange(0, 5)
	content := map[string][]byte{}
	meta := func(name, expiry string) string { // recorded with the data file's commit
		t.Helper()
		key := layout.MetadataKey(e.table.Namespace, e.table.Name, name)
		content[key] = []byte("the bytes of " + name)
		if _, err := e.db.Exec(e.ctx, `INSERT INTO mink_meta_files (table_id, key, content, created_at, expires_at)
			SELECT $1, $2, $3, committed_at, `+expiry+` FROM mink_data_files WHERE key = $4`,
			e.table.ID, key, content[key], data); err != nil {
			t.Fatal(err)
		}
		return key
	}
	list, manifest := meta("snap-1-1-a.avro", "NULL"), meta("a-m0.avro", "NULL")
	doc := meta("00001-a.metadata.json", "NULL")
	loadList := meta("snap-2-1-b.avro", "now() + interval '1 hour'")

	w := own.newWarmer()
	if err := own.warmLook(e.ctx, w); err != nil {
		t.Fatal(err)
	}
	var queued []string
	for _, f := range w.queue {
		queued = append(queued, f.Key)
	}
	if len(queued) != 3 || queued[2] != data || !slices.Contains(queued[:2], list) || !slices.Contains(queued[:2], manifest) {
		t.Fatalf("queued %v, want the manifest list %s and the manifest %s, then the data file %s", queued, list, manifest, data)
	}
	warmAll(e.ctx, own, w)
	for _, k := range []string{doc, loadList} {
		if own.o.Cache.Contains(k) {
			t.Errorf("%s was warmed", k)
		}
	}
	if w := own.WarmStats(); w.Warmed != 3 {
		t.Fatalf("warm stats %+v, want 3 warmed", w)
	}
	for _, k := range []string{list, manifest} {
		obj, err := own.Open(e.ctx, k, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(obj.Body)
		obj.Close()
		if err != nil || !obj.CacheHit || !bytes.Equal(got, content[k]) {
			t.Fatalf("%s: %q (cache hit %v, %v), want %q from the cache", k, got, obj.CacheHit, err, content[k])
		}
	}
}
