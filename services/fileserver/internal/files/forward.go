package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	filev1 "github.com/minkhq/mink/gen/mink/file/v1"
	"github.com/minkhq/mink/pkg/apierr"
)

const (
	// mdServedBy is the trailer with which an owner signs every answer, error or not. A
	// forwarding node that gets an error without it knows the owner never answered.
	mdServedBy = "mink-served-by"
	// mdForwardedBy marks a forwarded read (for the owner's logs and traces).
	mdForwardedBy = "mink-forwarded-by"
	// The request headers in which nodes of older versions sent a measure's budget and
	// TTL, refused (ReadFile).
	mdLegacyMeasureMaxBytes = "mink-measure-max-bytes"
	mdLegacyMeasureTTL      = "mink-measure-ttl-ms"
	// chunkSize is the bytes per streamed message: large enough that per-message costs
	// vanish, well under gRPC's 4 MiB default message limit. For a caller of the proto
	// codec, the owner's gRPC encodes each message into a buffer of its default pool,
	// which hands out 1 MiB for anything over 32 KiB and zeroes all of it: a chunk just
	// under 1 MiB (its message, with the field's tag and length, is at most 1 MiB)
	// wastes none of that zeroing.
	chunkSize = 1<<20 - 16
	// fastChunkSize is the bytes per message for a caller of chunkCodec, which copies no
	// chunk on the owner: 1 MiB, so that a 1 MiB file is one message. Smaller chunks
	// (64 and 256 KiB, tried) let the relay start writing to its client sooner, but cost
	// more CPU per byte, and on a busy machine there is no idle core to gain on.
	fastChunkSize = 1 << 20
	// Flow control and reads of the connections to other file servers (relayDialOptions).
	windowStream = 2 << 20
	windowConn   = 8 << 20
	readBuffer   = 64 << 10
)

// relayDialOptions are for the connections to other file servers, which carry
// forwarded reads: bulk streams one way, owner to relay. A fixed stream window of two
// chunks (gRPC starts from 64 KiB and grows it by its BDP estimate) lets the owner send
// the next chunk while this node writes the last one to its client. What a window admits
// waits in memory while the client reads slower than the owner sends: at most
// windowStream per forwarded read, windowConn per owner. A larger read buffer than
// gRPC's 32 KiB takes in more frames per read.
func relayDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(windowStream),
		grpc.WithInitialConnWindowSize(windowConn),
		grpc.WithReadBufferSize(readBuffer),
		// The frames a chunk arrives in are read into buffers of bufPool, which (unlike
		// gRPC's default pool) does not zero what is about to be overwritten.
		experimental.WithBufferPool(bufPool),
	}
}

// Register adds the file service to a gRPC server.
func (s *Store) Register(gs *grpc.Server) { filev1.RegisterFileServiceServer(gs, s) }

// ReadFile serves a read forwarded by another file server. It is always served here,
// whatever this node thinks the owner is, so a read cannot bounce between nodes whose
// member lists differ for a moment.
func (s *Store) ReadFile(req *filev1.ReadFileRequest, stream grpc.ServerStreamingServer[filev1.ReadFileResponse]) error {
	ctx := stream.Context()
	if req.GetMeasure() != nil {
		return s.serveMeasure(req, stream)
	}
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(mdLegacyMeasureTTL)) > 0 || len(md.Get(mdLegacyMeasureMaxBytes)) > 0 {
		// A node of an older version asks for a measure in request headers, which are no
		// longer read (their values were unbounded). Unsigned, the answer reads as "owner
		// unreachable" there, and that node measures the span itself, as it would without
		// this one: live loads go on through a rolling upgrade.
		return apierr.New(apierr.Unimplemented, "node %s reads a measure's budget and TTL from ReadFileRequest.measure only, not from %s/%s headers: upgrade the calling node",
			s.o.NodeID, mdLegacyMeasureMaxBytes, mdLegacyMeasureTTL)
	}
	err := ValidKey(req.GetKey())
	var obj *Object
	if err == nil {
		s.inflight.Add(1)
		obj, err = s.track(s.openLocal(ctx, req.GetKey(), rangeFromProto(req.GetRange()), req.GetInfoOnly()))
	}
	// Sign the answer, unless this node is stopping and cannot serve the file: unsigned,
	// the forwarding node takes it for unreachable and serves the file itself.
	if !errors.Is(err, errStopping) {
		stream.SetTrailer(metadata.Pairs(mdServedBy, s.o.NodeID))
	}
	if err != nil {
		return apierr.GRPC(err)
	}
	defer obj.Close()
	info := &filev1.FileInfo{
		Size: obj.Size, Etag: obj.ETag, LastModified: timestamppb.New(obj.LastModified),
		Offset: obj.Offset, Length: obj.Length, ServedBy: obj.ServedBy, CacheHit: obj.CacheHit,
	}
	head := &filev1.ReadFileResponse{Part: &filev1.ReadFileResponse_Info{Info: info}}
	if obj.Body != nil && obj.Length > 0 && contentSubtype(ctx) == chunkCodecName {
		return s.sendChunks(ctx, req.GetKey(), obj, head, stream)
	}
	if err := stream.Send(head); err != nil {
		return err
	}
	if obj.Body == nil {
		return nil
	}
	// A caller of the proto codec (grpcurl, a node of an older version): one buffer for
	// every message of the stream, since Send has copied the chunk into gRPC's own
	// encoding buffer (the proto codec marshals before Send returns), and stats handlers
	// must copy what they keep of a message (stats.OutPayload; otelgrpc keeps nothing).
	// Only the x/net/trace event log, off unless grpc.EnableTracing is set, would format
	// a sent message later.
	p := bufPool.Get(int(min(obj.Length, chunkSize)))
	defer bufPool.Put(p)
	buf := *p
	for sent := int64(0); sent < obj.Length; {
		if grpc.EnableTracing {
			buf = make([]byte, len(buf))
		}
		n, err := io.ReadFull(obj.Body, buf[:min(int64(len(buf)), obj.Length-sent)])
		if err != nil {
			return apierr.GRPC(apierr.Failed(err, "read %s at %d", req.GetKey(), obj.Offset+sent))
		}
		if err := stream.Send(&filev1.ReadFileResponse{Part: &filev1.ReadFileResponse_Chunk{Chunk: buf[:n]}}); err != nil {
			return err
		}
		sent += int64(n)
		s.met.served(ctx, "forward", int64(n))
	}
	return nil
}

// sendChunks streams head (the info) and obj's bytes to a caller of chunkCodec: each
// chunk is read into a pooled buffer that gRPC writes to the connection as it is and
// frees once written.
func (s *Store) sendChunks(ctx context.Context, key string, obj *Object, head *filev1.ReadFileResponse, stream grpc.ServerStream) error {
	for sent := int64(0); sent < obj.Length; {
		p := bufPool.Get(int(min(obj.Length-sent, fastChunkSize)))
		n, err := io.ReadFull(obj.Body, *p)
		if err != nil {
			bufPool.Put(p)
			return apierr.GRPC(apierr.Failed(err, "read %s at %d", key, obj.Offset+sent))
		}
		if head != nil {
			// The info waits for the first chunk, so that both leave in one write: a
			// small file wakes the relay once, not twice.
			if err := stream.SendMsg(head); err != nil {
				bufPool.Put(p)
				return err
			}
			head = nil
		}
		if err := stream.SendMsg(&outChunk{buf: mem.NewBuffer(p, bufPool), n: n}); err != nil {
			return err
		}
		sent += int64(n)
		s.met.served(ctx, "forward", int64(n))
	}
	return nil
}

// bufPool holds the buffers of chunks: the owners' send buffers, the relays' HTTP/2
// frames (16 KiB) and the buffers a relayed chunk is gathered in from its frames. Unlike
// gRPC's default pool it does not zero a buffer it hands out: every byte used is written
// first.
var bufPool = newChunkPool(16<<10, 32<<10, 128<<10, 512<<10, msgSize)

// msgSize bounds the wire size of a chunk's message: the chunk, its field tag and length.
const msgSize = fastChunkSize + 16

// chunkPool is a mem.BufferPool with a few sizes of buffer, up to msgSize: a whole
// chunk, or a range of a column chunk or two (what Parquet readers ask for). A buffer of
// a few KiB (a footer) or of more than msgSize is allocated as it is.
type chunkPool struct {
	sizes []int // ascending
	pools []sync.Pool
}

func newChunkPool(sizes ...int) *chunkPool {
	return &chunkPool{sizes: sizes, pools: make([]sync.Pool, len(sizes))}
}

func (c *chunkPool) Get(n int) *[]byte {
	i, _ := slices.BinarySearch(c.sizes, n)
	if n < c.sizes[0]/8 || i == len(c.sizes) {
		b := make([]byte, n)
		return &b
	}
	if b, ok := c.pools[i].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, c.sizes[i])
	return &b
}

func (c *chunkPool) Put(b *[]byte) {
	if i, ok := slices.BinarySearch(c.sizes, cap(*b)); ok {
		c.pools[i].Put(b)
	}
}

func rangeFromProto(r *filev1.ByteRange) *Range {
	switch {
	case r == nil:
		return nil
	case r.Suffix != nil:
		return &Range{IsSuffix: true, Suffix: r.GetSuffix()}
	case r.Last != nil:
		return &Range{First: r.GetFirst(), Last: r.GetLast()}
	}
	return &Range{First: r.GetFirst(), Last: -1}
}

func rangeToProto(r *Range) *filev1.ByteRange {
	switch {
	case r == nil:
		return nil
	case r.IsSuffix:
		return &filev1.ByteRange{Suffix: &r.Suffix}
	case r.Last >= 0:
		return &filev1.ByteRange{First: r.First, Last: &r.Last}
	}
	return &filev1.ByteRange{First: r.First}
}

// unreachedError: the owner never answered (no connection, or it went away before
// answering), as opposed to an answer that is an error.
type unreachedError struct {
	node, addr string
	err        error
}

func (e *unreachedError) Error() string {
	return fmt.Sprintf("owner %s at %s is unreachable: %v", e.node, e.addr, e.err)
}
func (e *unreachedError) Unwrap() error { return e.err }

// forward opens key at its owner node and returns the object its stream carries.
func (s *Store) forward(ctx context.Context, node, addr, key string, rng *Range, infoOnly bool) (*Object, error) {
	conn, err := s.peers.Conn(addr)
	if err != nil {
		return nil, &unreachedError{node, addr, err}
	}
	sctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, mdForwardedBy, s.o.NodeID))
	stream, err := filev1.NewFileServiceClient(conn).ReadFile(sctx, &filev1.ReadFileRequest{
		Key: key, Range: rangeToProto(rng), InfoOnly: infoOnly,
	}, grpc.CallContentSubtype(chunkCodecName))
	if err != nil {
		cancel()
		s.met.forwarded(ctx, "error")
		return nil, &unreachedError{node, addr, err}
	}
	var first relayMsg
	err = stream.RecvMsg(&first)
	if err != nil {
		cancel()
		if errors.Is(err, io.EOF) {
			err = apierr.New(apierr.Internal, "owner %s ended the stream of %s without an answer", node, key)
		}
		if len(stream.Trailer().Get(mdServedBy)) == 0 && ctx.Err() == nil {
			s.met.forwarded(ctx, "error")
			return nil, &unreachedError{node, addr, err}
		}
		s.met.forwarded(ctx, "ok") // the owner answered; its answer is an error
		return nil, err
	}
	info := first.info
	first.free()
	if info == nil {
		cancel()
		s.met.forwarded(ctx, "error")
		return nil, apierr.New(apierr.Internal, "owner %s answered %s with bytes before its info", node, key)
	}
	s.met.forwarded(ctx, "ok")
	obj := &Object{
		Info: Info{Size: info.GetSize(), ETag: info.GetEtag(), LastModified: info.GetLastModified().AsTime(),
			Offset: info.GetOffset(), Length: info.GetLength(), ServedBy: info.GetServedBy(),
			CacheHit: info.GetCacheHit(), Forwarded: true},
		close: func() error { cancel(); return nil },
	}
	if !infoOnly {
		r := &chunkReader{stream: stream, left: info.GetLength(), node: node, key: key}
		obj.Body = r
		obj.close = func() error { r.msg.free(); cancel(); return nil }
	}
	return obj, nil
}

// chunkCodecName is the content-subtype of the forwarded reads between file servers of
// this version, whose codec is chunkCodec. A caller without it (grpcurl, an older node)
// gets the proto codec; an older owner serves a caller with it by the proto codec too
// (gRPC falls back to it for a subtype it does not know): the bytes on the wire are the
// same protobuf encoding either way.
const chunkCodecName = "mink-chunks"

// Registered by name, it is used only by calls that ask for it.
func init() { encoding.RegisterCodecV2(chunkCodec{}) }

// contentSubtype is the codec the caller of a stream asked for ("application/grpc+X"):
// "" for the proto codec.
func contentSubtype(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, ct := range md.Get("content-type") {
		if rest, ok := strings.CutPrefix(ct, "application/grpc"); ok && len(rest) > 1 && (rest[0] == '+' || rest[0] == ';') {
			return strings.ToLower(rest[1:])
		}
	}
	return ""
}

// outChunk is a ReadFileResponse with a chunk, for chunkCodec: its bytes are sent from
// buf as they are, and gRPC frees buf once they are written.
type outChunk struct {
	buf mem.Buffer
	n   int // buf's length, kept for String: buf is not ours once sent
}

// String is for gRPC's trace log (grpc.EnableTracing), which formats a message after it
// has been sent.
func (c *outChunk) String() string { return fmt.Sprintf("chunk of %d bytes", c.n) }

// relayMsg is a ReadFileResponse as received, for relaying its chunk without copying it:
// chunk points into buf, gRPC's receive buffer, which the receiver frees once the chunk
// is written.
type relayMsg struct {
	info  *filev1.FileInfo
	chunk []byte
	buf   mem.Buffer
}

func (m *relayMsg) free() {
	if m.buf != nil {
		m.buf.Free()
	}
	*m = relayMsg{}
}

// chunkCodec is the proto codec for forwarded reads, except for chunks. The owner
// encodes an outChunk as the proto codec encodes its ReadFileResponse (field 2, its
// length, its bytes), but hands gRPC the chunk's buffer instead of copying it into an
// encoding buffer that the default pool has zeroed first. The relay decodes a relayMsg,
// whose chunk is left in the received buffer rather than copied out as proto.Unmarshal
// does for bytes fields; any other message is decoded by proto.Unmarshal.
type chunkCodec struct{}

func (chunkCodec) Name() string { return chunkCodecName }

func (chunkCodec) Marshal(v any) (mem.BufferSlice, error) {
	c, ok := v.(*outChunk)
	if !ok {
		return encoding.GetCodecV2("proto").Marshal(v)
	}
	hdr := protowire.AppendTag(make([]byte, 0, 16), 2, protowire.BytesType)
	hdr = protowire.AppendVarint(hdr, uint64(c.n))
	return mem.BufferSlice{mem.SliceBuffer(hdr), c.buf}, nil
}

func (chunkCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*relayMsg)
	if !ok {
		return encoding.GetCodecV2("proto").Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(bufPool) // one copy at most, into a pooled buffer
	b := buf.ReadOnlyData()
	if num, typ, n := protowire.ConsumeTag(b); num == 2 && typ == protowire.BytesType {
		if chunk, k := protowire.ConsumeBytes(b[n:]); k >= 0 && n+k == len(b) {
			*m = relayMsg{chunk: chunk, buf: buf}
			return nil
		}
	}
	defer buf.Free()
	var resp filev1.ReadFileResponse
	if err := proto.Unmarshal(b, &resp); err != nil {
		return err
	}
	*m = relayMsg{info: resp.GetInfo(), chunk: resp.GetChunk()}
	return nil
}

// chunkReader reads a forwarded file's bytes from its stream. It fails (rather than
// ending short) if the stream ends before the promised length: a truncated file must
// never look whole. WriteTo hands each received chunk to the writer as it is, without
// copying it.
type chunkReader struct {
	stream    grpc.ServerStreamingClient[filev1.ReadFileResponse]
	msg       relayMsg // the last message received; msg.chunk is what is left of it
	left      int64    // bytes promised and not yet received
	node, key string
}

// next receives the next chunk into r.msg, freeing the one before.
func (r *chunkReader) next() error {
	r.msg.free()
	if r.left == 0 {
		return io.EOF
	}
	err := r.stream.RecvMsg(&r.msg)
	if errors.Is(err, io.EOF) {
		return apierr.New(apierr.Unavailable, "owner %s ended %s %d bytes early", r.node, r.key, r.left)
	}
	if err != nil {
		return err
	}
	if r.msg.info != nil {
		return apierr.New(apierr.Internal, "owner %s sent the info of %s twice", r.node, r.key)
	}
	r.left -= int64(len(r.msg.chunk))
	if r.left < 0 {
		return apierr.New(apierr.Internal, "owner %s sent more of %s than it promised", r.node, r.key)
	}
	return nil
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.msg.chunk) == 0 {
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.msg.chunk)
	r.msg.chunk = r.msg.chunk[n:]
	return n, nil
}

func (r *chunkReader) WriteTo(w io.Writer) (int64, error) {
	var written int64
	for {
		if len(r.msg.chunk) > 0 {
			n, err := w.Write(r.msg.chunk)
			written += int64(n)
			r.msg.chunk = r.msg.chunk[n:]
			if err != nil {
				return written, err
			}
		}
		if err := r.next(); err != nil {
			if errors.Is(err, io.EOF) {
				return written, nil
			}
			return written, err
		}
	}
}
