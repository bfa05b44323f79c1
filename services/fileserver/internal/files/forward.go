package files

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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
	// chunkSize is the bytes per streamed message: large enough that per-message costs
	// vanish, well under gRPC's 4 MiB default message limit.
	chunkSize = 256 << 10
)

// Register adds the file service to a gRPC server.
func (s *Store) Register(gs *grpc.Server) { filev1.RegisterFileServiceServer(gs, s) }

// ReadFile serves a read forwarded by another file server. It is always served here,
// whatever this node thinks the owner is, so a read cannot bounce between nodes whose
// member lists differ for a moment.
func (s *Store) ReadFile(req *filev1.ReadFileRequest, stream grpc.ServerStreamingServer[filev1.ReadFileResponse]) error {
	ctx := stream.Context()
	err := ValidKey(req.GetKey())
	if err == nil {
		maxBytes, ttl, measure, merr := isMeasure(ctx)
		switch {
		case merr != nil:
			err = merr
		case measure:
			return s.serveMeasure(req, stream, maxBytes, ttl)
		}
	}
	var obj *Object
	if err == nil {
		obj, err = s.openLocal(ctx, req.GetKey(), rangeFromProto(req.GetRange()), req.GetInfoOnly())
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
	if err := stream.Send(&filev1.ReadFileResponse{Part: &filev1.ReadFileResponse_Info{Info: info}}); err != nil {
		return err
	}
	if obj.Body == nil {
		return nil
	}
	for sent := int64(0); sent < obj.Length; {
		// A fresh buffer per message: stats handlers may hold a sent message.
		buf := make([]byte, min(chunkSize, obj.Length-sent))
		n, err := io.ReadFull(obj.Body, buf)
		if err != nil {
			return apierr.GRPC(fmt.Errorf("read %s at %d: %w", req.GetKey(), obj.Offset+sent, err))
		}
		if err := stream.Send(&filev1.ReadFileResponse{Part: &filev1.ReadFileResponse_Chunk{Chunk: buf[:n]}}); err != nil {
			return err
		}
		sent += int64(n)
		s.met.served(ctx, "forward", int64(n))
	}
	return nil
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
	})
	if err != nil {
		cancel()
		s.met.forwarded(ctx, "error")
		return nil, &unreachedError{node, addr, err}
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		if errors.Is(err, io.EOF) {
			err = status.Error(codes.Internal, "owner ended the stream without an answer")
		}
		if len(stream.Trailer().Get(mdServedBy)) == 0 && ctx.Err() == nil {
			s.met.forwarded(ctx, "error")
			return nil, &unreachedError{node, addr, err}
		}
		s.met.forwarded(ctx, "ok") // the owner answered; its answer is an error
		return nil, err
	}
	info := first.GetInfo()
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
		obj.Body = &chunkReader{stream: stream, left: info.GetLength(), node: node, key: key}
	}
	return obj, nil
}

// chunkReader reads a forwarded file's bytes from its stream. It fails (rather than
// ending short) if the stream ends before the promised length: a truncated file must
// never look whole.
type chunkReader struct {
	stream    grpc.ServerStreamingClient[filev1.ReadFileResponse]
	buf       []byte
	left      int64 // bytes promised and not yet received
	node, key string
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.left == 0 {
			return 0, io.EOF
		}
		msg, err := r.stream.Recv()
		if errors.Is(err, io.EOF) {
			return 0, apierr.New(apierr.Unavailable, "owner %s ended %s %d bytes early", r.node, r.key, r.left)
		}
		if err != nil {
			return 0, err
		}
		r.buf = msg.GetChunk()
		r.left -= int64(len(r.buf))
		if r.left < 0 {
			return 0, apierr.New(apierr.Internal, "owner %s sent more of %s than it promised", r.node, r.key)
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
