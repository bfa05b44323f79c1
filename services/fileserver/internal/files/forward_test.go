package files

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	filev1 "github.com/minkhq/mink/gen/mink/file/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/layout"
)

// frames splits a message's wire bytes as the HTTP/2 transport hands them over: one
// buffer per 16 KiB frame.
func frames(b []byte) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), 16<<10)
		s = append(s, mem.SliceBuffer(bytes.Clone(b[:n])))
		b = b[n:]
	}
	return s
}

// fakeStream plays the owner's side of a ReadFile stream: each message is decoded by
// relayCodec from its frames, as gRPC does.
type fakeStream struct {
	grpc.ClientStream
	msgs [][]byte // wire bytes, in order
}

func (f *fakeStream) Recv() (*filev1.ReadFileResponse, error) { panic("not used") }

func (f *fakeStream) RecvMsg(m any) error {
	if len(f.msgs) == 0 {
		return io.EOF
	}
	data := frames(f.msgs[0])
	f.msgs = f.msgs[1:]
	defer data.Free() // as gRPC does once Unmarshal returns
	return chunkCodec{}.Unmarshal(data, m)
}

func chunkMsg(t testing.TB, b []byte) []byte {
	t.Helper()
	w, err := proto.Marshal(&filev1.ReadFileResponse{Part: &filev1.ReadFileResponse_Chunk{Chunk: b}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// TestRelayCodecChunks: a chunk decodes to its bytes whatever its size and however its
// message is split into frames, left in the received buffer.
func TestRelayCodecChunks(t *testing.T) {
	for _, n := range []int{0, 1, 100, 16<<10 - 3, 16 << 10, 16<<10 + 3, 300 << 10, chunkSize} {
		want := pattern(n)
		var m relayMsg
		data := frames(chunkMsg(t, want))
		if err := (chunkCodec{}).Unmarshal(data, &m); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		data.Free()
		if m.info != nil || !bytes.Equal(m.chunk, want) {
			t.Fatalf("%d bytes: got info %v and %d bytes", n, m.info, len(m.chunk))
		}
		if n > 0 && m.buf == nil {
			t.Errorf("%d bytes: the chunk was copied out of the received buffer", n)
		}
		m.free()
	}
}

// TestRelayCodecOtherMessages: the info, and a chunk encoded otherwise than the owner
// does (an unknown field first), decode as proto.Unmarshal decodes them.
func TestRelayCodecOtherMessages(t *testing.T) {
	info := &filev1.FileInfo{Size: 42, Etag: `"ab"`, Length: 42, ServedBy: "fs-1", CacheHit: true}
	w, err := proto.Marshal(&filev1.ReadFileResponse{Part: &filev1.ReadFileResponse_Info{Info: info}})
	if err != nil {
		t.Fatal(err)
	}
	var m relayMsg
	if err := (chunkCodec{}).Unmarshal(frames(w), &m); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(m.info, info) || m.chunk != nil {
		t.Fatalf("info: got %v, chunk %d bytes", m.info, len(m.chunk))
	}

	want := pattern(20 << 10)
	odd := protowire.AppendTag(nil, 15, protowire.VarintType)
	odd = protowire.AppendVarint(odd, 7)
	odd = append(odd, chunkMsg(t, want)...)
	if err := (chunkCodec{}).Unmarshal(frames(odd), &m); err != nil {
		t.Fatal(err)
	}
	if m.info != nil || !bytes.Equal(m.chunk, want) {
		t.Fatalf("chunk after an unknown field: got info %v and %d bytes", m.info, len(m.chunk))
	}

	if err := (chunkCodec{}).Unmarshal(frames([]byte{0x12, 0x05, 1}), &m); err == nil {
		t.Fatal("a truncated message decoded")
	}

	// Anything else (the request, on the owner's side) is the proto codec's.
	req := &filev1.ReadFileRequest{Key: "a/b", InfoOnly: true}
	out, err := chunkCodec{}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var got filev1.ReadFileRequest
	if err := (chunkCodec{}).Unmarshal(out, &got); err != nil || !proto.Equal(&got, req) {
		t.Fatalf("request: %v, %v", &got, err)
	}
}

// TestChunkReader: a forwarded body yields exactly the promised bytes through WriteTo
// and through Read, and fails when the owner sends fewer or more.
func TestChunkReader(t *testing.T) {
	parts := [][]byte{pattern(5), pattern(chunkSize), pattern(0), pattern(70 << 10)}
	var all []byte
	var msgs [][]byte
	for _, p := range parts {
		all = append(all, p...)
		msgs = append(msgs, chunkMsg(t, p))
	}
	reader := func(msgs [][]byte, promised int) *chunkReader {
		return &chunkReader{stream: &fakeStream{msgs: msgs}, left: int64(promised), node: "fs-2", key: "k"}
	}

	var out bytes.Buffer
	n, err := reader(msgs, len(all)).WriteTo(&out)
	if err != nil || n != int64(len(all)) || !bytes.Equal(out.Bytes(), all) {
		t.Fatalf("WriteTo: %d bytes, %v", n, err)
	}
	got, err := io.ReadAll(reader(msgs, len(all)))
	if err != nil || !bytes.Equal(got, all) {
		t.Fatalf("Read: %d bytes, %v", len(got), err)
	}

	// The stream ends early: an error, never a short body that looks whole.
	_, err = reader(msgs[:2], len(all)).WriteTo(io.Discard)
	if apierr.Classify(err) != apierr.Unavailable {
		t.Fatalf("stream ended early: %v", err)
	}
	if _, err := io.ReadAll(reader(msgs[:2], len(all))); apierr.Classify(err) != apierr.Unavailable {
		t.Fatalf("stream ended early, Read: %v", err)
	}
	// More than promised.
	if _, err := reader(msgs, len(all)-1).WriteTo(io.Discard); apierr.Classify(err) != apierr.Internal {
		t.Fatalf("more than promised: %v", err)
	}
	// A writer's error ends WriteTo with it.
	errFull := errors.New("full")
	if _, err := reader(msgs, len(all)).WriteTo(failingWriter{errFull}); !errors.Is(err, errFull) {
		t.Fatalf("writer error: %v", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestBufPool: a buffer comes from the smallest size that holds it; one of a few KiB or
// larger than a message is allocated as it is.
func TestBufPool(t *testing.T) {
	for _, c := range []struct{ n, cap int }{
		{0, 0}, {10, 10}, {2<<10 - 1, 2<<10 - 1}, {2 << 10, 16 << 10}, {16 << 10, 16 << 10}, {16<<10 + 1, 32 << 10}, {32 << 10, 32 << 10},
		{32<<10 + 1, 128 << 10}, {300 << 10, 512 << 10}, {chunkSize, msgSize}, {msgSize, msgSize},
		{msgSize + 1, msgSize + 1},
	} {
		for range 2 { // new, then from the pool
			p := bufPool.Get(c.n)
			if len(*p) != c.n || cap(*p) != c.cap {
				t.Fatalf("Get(%d): %d bytes, capacity %d; want capacity %d", c.n, len(*p), cap(*p), c.cap)
			}
			bufPool.Put(p)
		}
	}
}

// TestChunkCodecEncodesAsProto: an owner's chunk is on the wire exactly as the proto
// codec encodes its ReadFileResponse, so any protobuf client reads it.
func TestChunkCodecEncodesAsProto(t *testing.T) {
	for _, n := range []int{1, 127, 128, 16 << 10, chunkSize} {
		want := chunkMsg(t, pattern(n))
		p := bufPool.Get(n)
		copy(*p, pattern(n))
		out, err := chunkCodec{}.Marshal(&outChunk{buf: mem.NewBuffer(p, bufPool), n: n})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: encoded as %d bytes unlike proto.Marshal's %d", n, len(got), len(want))
		}
		out.Free()
	}
}

// TestReadFileEitherCodec: an owner serves the same bytes to a file server (chunkCodec,
// through forward) and to a plain protobuf client (grpcurl, an older node), whole and
// in ranges, over real gRPC behind the peers' door.
func TestReadFileEitherCodec(t *testing.T) {
	e := newMeasureEnv(t, "fs-1", "fs-2")
	ctx := e.ctx
	content := make([]byte, 2*chunkSize+12345) // three chunks, the last a short one
	for i := range content {
		content[i] = byte(i*31 + i>>11)
	}
	key := layout.MetadataKey("default", "clicks", "either-codec.bin")
	if _, err := e.db.Exec(ctx, `INSERT INTO mink_meta_files (table_id, key, content) VALUES ($1, $2, $3)`,
		e.table.ID, key, content); err != nil {
		t.Fatal(err)
	}
	owner, _ := e.stores["fs-1"].Owner(key)
	relay := map[string]string{"fs-1": "fs-2", "fs-2": "fs-1"}[owner]
	for _, c := range []struct {
		rng         *Range
		first, last int
	}{
		{nil, 0, len(content) - 1},
		{&Range{First: chunkSize - 5, Last: chunkSize + 5}, chunkSize - 5, chunkSize + 5},
		{&Range{IsSuffix: true, Suffix: 100}, len(content) - 100, len(content) - 1},
	} {
		want := content[c.first : c.last+1]
		obj, err := e.stores[relay].Open(ctx, key, c.rng, false)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		_, err = obj.Body.(io.WriterTo).WriteTo(&got)
		obj.Close()
		if err != nil || !obj.Forwarded || !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("range %+v through %s: forwarded %v, %d bytes (want %d), %v", c.rng, relay, obj.Forwarded, got.Len(), len(want), err)
		}

		conn, err := grpc.NewClient(e.addrs[owner], grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(auth.NewPeerCredentials(e.auth, relay)))
		if err != nil {
			t.Fatal(err)
		}
		stream, err := filev1.NewFileServiceClient(conn).ReadFile(ctx, &filev1.ReadFileRequest{Key: key, Range: rangeToProto(c.rng)})
		if err != nil {
			t.Fatal(err)
		}
		var plain []byte
		var info *filev1.FileInfo
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.GetInfo() != nil {
				info = m.GetInfo()
			}
			plain = append(plain, m.GetChunk()...)
		}
		conn.Close()
		if info.GetLength() != int64(len(want)) || !bytes.Equal(plain, want) {
			t.Fatalf("range %+v, plain protobuf client: info %v, %d bytes (want %d)", c.rng, info, len(plain), len(want))
		}
	}
}
