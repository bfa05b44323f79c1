package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/atomicmax"
	"github.com/minkhq/mink/pkg/filecache"
	"github.com/minkhq/mink/pkg/flight"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/upsert"
)

// buildSlot waits for one of the BuildConcurrency build slots for b, a build of what (a
// key, or a tail's span); release it when the build ends. It fails when every reader of
// the build has gone first.
func (s *Store) buildSlot(b *flight.Build, what string) (release func(), err error) {
	select {
	case s.slots <- struct{}{}:
	case <-b.Context().Done():
		return nil, b.Context().Err()
	}
	if !b.Begin() { // the slot came as the last reader left
		<-s.slots
		return nil, context.Canceled
	}
	atomicmax.Store(&s.buildsPeak, s.buildsRunning.Add(1))
	if s.slotTaken != nil {
		s.slotTaken(what)
	}
	return func() {
		s.buildsRunning.Add(-1)
		<-s.slots
	}, nil
}

// BuildStats are the builds from Kafka running now and the most that ran at once.
type BuildStats struct {
	Running, Peak int64
	PagesInMemory int64 // bytes of finished pages the builds hold in memory now
	PagesPeak     int64 // the most they held at once
	PagesSpilled  int64 // bytes of pages written to temporary files, in all
}

// BuildStats reads the build counters.
func (s *Store) BuildStats() BuildStats {
	return BuildStats{Running: s.buildsRunning.Load(), Peak: s.buildsPeak.Load(),
		PagesInMemory: s.pages.InMemory(), PagesPeak: s.pages.Peak(), PagesSpilled: s.pages.Spilled()}
}

// problem is a file known not to be rebuildable with its recorded bytes.
type problem struct {
	err   error
	until time.Time
}

// known returns the error of a file recently found not rebuildable, if any.
func (s *Store) known(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.problems[key]
	if !ok {
		return nil
	}
	if time.Now().After(p.until) {
		delete(s.problems, key)
		return nil
	}
	return p.err
}

// fillShared builds key into the cache, or waits for the build already under way. The
// build runs under the store's context, not the caller's: a reader that hangs up does
// not waste the build the next reader will want. A build that has not started yet (it
// waits for a slot) is dropped when every reader waiting for it has gone.
func (s *Store) fillShared(ctx context.Context, key string) error {
	_, _, err := s.fills.Do(ctx, key, func(b *flight.Build) (struct{}, error) { return struct{}{}, s.fill(key, b) })
	return s.stopping(err)
}

// lookup reads what Postgres records of key.
func (s *Store) lookup(ctx context.Context, key string) (objects.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.LookupTimeout)
	defer cancel()
	r, err := s.objects.Lookup(ctx, key)
	if err != nil && apierr.Classify(err) != apierr.NotFound {
		return r, apierr.Postgres(err, "look up %s", key)
	}
	return r, err
}

// fill builds key into the cache, as b; a data file's build waits for a slot.
func (s *Store) fill(key string, b *flight.Build) error {
	ctx, cancel := context.WithTimeout(s.base, s.o.BuildTimeout)
	defer cancel()
	r, err := s.lookup(ctx, key)
	if err != nil {
		if apierr.Classify(err) != apierr.NotFound { // an unknown key is no build
			s.met.buildFailed(ctx, "unknown", reasonOf(err))
		}
		return err
	}
	if !r.Data {
		if !b.Begin() { // no slot to wait for: a copy of r.Content
			return context.Canceled
		}
		return s.fillMeta(ctx, r)
	}
	if r.DeletesOf != "" {
		// From the index alone, not Kafka: no build slot, as for metadata.
		if !b.Begin() {
			return context.Canceled
		}
		return s.fillDeletes(ctx, r)
	}
	return s.fillData(ctx, r, b)
}

// fillDeletes builds an upsert table's position delete file from the index alone (the
// key hashes of the partition's ranges), checked against its recorded bytes.
func (s *Store) fillDeletes(ctx context.Context, r objects.Record) error {
	var settings parquetbuild.Settings
	if err := json.Unmarshal(r.Settings, &settings); err != nil {
		s.met.buildFailed(ctx, "deletes", "error")
		return apierr.Wrap(apierr.Internal, err, "file %s: its recorded settings do not decode", r.Key)
	}
	d := rangefile.Deletes{Table: r.TableID, Partition: r.Partition, Start: r.Start, End: r.End, DataKey: r.DeletesOf, CoverEnd: r.CoverEnd, Tail: r.DeletesTail}
	err := s.commit(r, r.SHA256, func(w io.Writer) (int64, error) {
		fs, err := rangefile.BuildDeletes(ctx, s.o.DB, s.o.Keys, d, settings, w)
		if err != nil {
			if c := apierr.Classify(err); c == apierr.Unavailable || c == apierr.DeadlineExceeded {
				return 0, apierr.Postgres(err, "build %s", r.Key)
			}
			return 0, apierr.Failed(err, "build %s", r.Key)
		}
		if fs.Size != r.Size || fs.SHA256 != r.SHA256 {
			// Only a changed index can do this (a range re-derived after compaction, for
			// the snapshots before it): never serve other bytes than the manifest
			// describes, and tell the writer, which expires the snapshots naming it.
			detail := fmt.Sprintf("delete file rebuilt from the index as %d bytes with sha256 %s, but %d bytes with sha256 %s were recorded; its partition's ranges were re-derived since (compaction)",
				fs.Size, fs.SHA256, r.Size, r.SHA256)
			err := replacing(fmt.Errorf("%w: %s", rangefile.ErrMismatch, detail), "the index of its records changed since (compaction)")
			s.reportProblem(r, "", "mismatch", detail, err) // the log names the table by id
			return 0, err
		}
		return fs.Size, nil
	})
	if err != nil {
		s.met.buildFailed(ctx, "deletes", reasonOf(err))
		return err
	}
	s.met.built(ctx, "deletes")
	return nil
}

func (s *Store) fillMeta(ctx context.Context, r objects.Record) error {
	sum := sha256.Sum256(r.Content)
	err := s.commit(r, hex.EncodeToString(sum[:]), func(w io.Writer) (int64, error) {
		n, err := w.Write(r.Content)
		return int64(n), err
	})
	if err != nil {
		s.met.buildFailed(ctx, "metadata", reasonOf(err))
		return err
	}
	s.met.built(ctx, "metadata")
	return nil
}

func (s *Store) fillData(ctx context.Context, r objects.Record, b *flight.Build) error {
	release, err := s.buildSlot(b, r.Key)
	if err != nil {
		return err // no reader wants it any more
	}
	defer release()
	start := time.Now()
	t, err := tables.GetByID(ctx, s.o.DB, r.TableID)
	if err != nil {
		if apierr.Classify(err) == apierr.NotFound {
			err = apierr.New(apierr.NotFound, "no file %s in bucket mink: its table (id %d) was dropped", r.Key, r.TableID)
		} else {
			err = apierr.Postgres(err, "look up the table of %s", r.Key)
		}
		s.met.buildFailed(ctx, "data", reasonOf(err))
		return err
	}
	if t.TopicLost != "" {
		// Its topic was created again: Kafka holds other records at these offsets, so a
		// build would only find bytes that differ (and report them for repair).
		err := tables.TopicLostError(t, t.TopicLost)
		s.met.buildFailed(ctx, "data", reasonOf(err))
		return err
	}
	var settings parquetbuild.Settings
	if err := json.Unmarshal(r.Settings, &settings); err != nil {
		err = apierr.Wrap(apierr.Internal, err, "file %s: its recorded settings do not decode", r.Key)
		s.met.buildFailed(ctx, "data", "error")
		return err
	}
	err = s.commit(r, r.SHA256, func(w io.Writer) (int64, error) {
		fs, err := rangefile.BuildOffsets(ctx, s.o.Kafka, s.o.Codecs, t, settings, r.Partition, r.Start, r.End, w, parquetbuild.WithPages(s.pages))
		if err != nil {
			return 0, s.buildErr(ctx, t, r, err)
		}
		if fs.Size != r.Size || fs.SHA256 != r.SHA256 {
			detail := fmt.Sprintf("rebuilt from topic %q partition %d offsets [%d, %d) it is %d bytes with sha256 %s, but %d bytes with sha256 %s were recorded; Kafka no longer yields the indexed records (compacted or rewritten?)",
				t.Topic, r.Partition, r.Start, r.End, fs.Size, fs.SHA256, r.Size, r.SHA256)
			err := replacing(fmt.Errorf("%w: %s", rangefile.ErrMismatch, detail), "Kafka no longer yields the records it was built from (compaction)")
			s.reportProblem(r, t.FullName(), "mismatch", detail, err)
			return 0, err
		}
		return fs.Size, nil
	})
	if err != nil {
		s.met.buildFailed(ctx, "data", reasonOf(err))
		return err
	}
	s.met.built(ctx, "data")
	s.log.Debug("built a data file", "key", r.Key, "table", t.FullName(), "partition", r.Partition,
		"start_offset", r.Start, "end_offset", r.End, "bytes", r.Size, "elapsed", time.Since(start))
	return nil
}

// commit writes a file into the cache through write, which checks what it wrote and
// returns its size; only a file whose written size matches the record is committed.
func (s *Store) commit(r objects.Record, sha string, write func(io.Writer) (int64, error)) error {
	if limit := s.o.Cache.Stats().Max; r.Size > limit {
		return apierr.New(apierr.ResourceExhausted, "file %s is %d bytes, more than this node's whole cache (--cache-bytes %d)", r.Key, r.Size, limit)
	}
	p, err := s.o.Cache.Create(r.Size)
	if err != nil {
		if errors.Is(err, filecache.ErrNoSpace) {
			return apierr.Wrap(apierr.ResourceExhausted, err, "no cache space to build %s now", r.Key)
		}
		return apierr.Wrap(apierr.Unavailable, err, "cannot build %s now: this node's cache cannot be written", r.Key)
	}
	n, err := write(p)
	if err == nil && (n != r.Size || p.Written() != r.Size) {
		err = apierr.New(apierr.Internal, "build %s: wrote %d bytes (measured %d), want %d", r.Key, p.Written(), n, r.Size)
	}
	if err != nil {
		p.Abort()
		return err
	}
	return p.Commit(filecache.Entry{Key: r.Key, Size: r.Size, ETag: objects.ETag(sha), LastModified: objects.LastModified(r.Created), TableID: r.TableID})
}

// buildErr says why a build from Kafka failed, naming Kafka when it is Kafka's doing.
func (s *Store) buildErr(ctx context.Context, t tables.Table, r objects.Record, err error) error {
	where := fmt.Sprintf("topic %q partition %d offsets [%d, %d)", t.Topic, r.Partition, r.Start, r.End)
	switch {
	case errors.Is(err, kafkasrc.ErrOffsetsGone):
		detail := where + " are no longer in Kafka (retention or deleted records)"
		e := replacing(fmt.Errorf("%s: %w", detail, err), "Kafka no longer holds the records it was built from (retention)")
		s.reportProblem(r, t.FullName(), "offsets_gone", detail, e)
		return e
	case errors.Is(err, kafkasrc.ErrUnavailable), errors.Is(err, kafkasrc.ErrUnknownTopic), errors.Is(err, kafkasrc.ErrNotStable):
		return apierr.Wrap(apierr.Unavailable, err, "cannot build %s from %s: kafka is unavailable", r.Key, where)
	case errors.Is(err, upsert.ErrChanged):
		// An upsert file read twice (too many latest records to hold) and compacted in
		// between: the next build reads what Kafka has now, and its check decides.
		return apierr.Wrap(apierr.Unavailable, err, "cannot build %s from %s: kafka changed while it was read; try again", r.Key, where)
	case errors.Is(err, kafkasrc.ErrClosed), s.base.Err() != nil:
		return apierr.Wrap(apierr.Unavailable, errors.Join(errStopping, err), "cannot build %s: file server %s", r.Key, s.o.NodeID)
	case ctx.Err() != nil:
		return apierr.Wrap(apierr.Unavailable, err, "building %s took longer than %v", r.Key, s.o.BuildTimeout)
	}
	return apierr.Failed(err, "build %s from %s", r.Key, where)
}

// replacing is the error of a file that Kafka no longer yields as recorded, why saying
// so in a client's words: retryable (apierr.DataLossErr), as the writer replaces the file
// at once. Nothing of the file (key, offsets, digests) is in what clients are told.
func replacing(cause error, why string) error {
	return apierr.DataLossErr(cause, "the file cannot be served now: %s; the table's writer is replacing it: retry, or load the table again", why)
}

// reportProblem reports a file that cannot be served with its recorded bytes, so that the
// table's writer replaces it: an error log line, a metric, and a row in
// mink_file_problems, which notifies the writer. The error is also remembered for
// ProblemTTL so that retries do not each rebuild the file.
func (s *Store) reportProblem(r objects.Record, table, reason, detail string, err error) {
	s.mu.Lock()
	s.problems[r.Key] = problem{err: err, until: time.Now().Add(s.o.ProblemTTL)}
	s.mu.Unlock()
	s.log.Error("file cannot be served with its recorded bytes; reported for replacement",
		"key", r.Key, "table", table, "table_id", r.TableID, "partition", r.Partition,
		"start_offset", r.Start, "end_offset", r.End, "reason", reason, "detail", detail)
	ctx, cancel := context.WithTimeout(s.base, s.o.LookupTimeout)
	defer cancel()
	s.met.reportedFile(ctx, reason)
	dbErr := objects.ReportProblem(ctx, s.o.DB, r.Key, r.TableID, reason, detail, s.o.NodeID)
	switch {
	case pg.Code(dbErr) == pg.UndefinedTable:
		s.log.Warn("mink_file_problems does not exist (schema older than the file-problems migration): the problem is only logged", "key", r.Key)
	case dbErr != nil:
		s.log.Warn("could not record the file problem in Postgres; it is logged only", "key", r.Key, "error", dbErr)
	}
}

// reasonOf labels a failure for metrics.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, rangefile.ErrMismatch):
		return "mismatch"
	case errors.Is(err, kafkasrc.ErrOffsetsGone):
		return "offsets_gone"
	}
	switch apierr.Classify(err) {
	case apierr.NotFound:
		return "not_found"
	case apierr.Unavailable:
		return "unavailable"
	case apierr.ResourceExhausted:
		return "no_space"
	}
	return "error"
}
