// Package schemafmt is what every Schema Registry format (Avro, Protobuf, JSON Schema)
// gives Mink: the Iceberg type a schema's values map to, and decoders from encoded
// values to rowcodec values of a table's Iceberg type. The formats live in the
// subpackages avrofmt, protofmt and jsonfmt; pkg/tablecodec ties them to tables (wire
// prefixes, schema ids, table schema versions).
//
// Design notes: docs/design/schemafmt.md.
package schemafmt

import (
	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Source is one registry schema's text with the schemas it references, resolved: all a
// format needs to compile it, with no registry at hand.
type Source struct {
	Text       string
	References []Reference // direct references, in the registry's order
}

// Reference is one schema a Source refers to.
type Reference struct {
	// Name is how the referring schema names it: an Avro full type name, a Protobuf
	// import path ("other.proto"), or a JSON Schema $ref URL.
	Name    string
	Subject string
	Version int
	Source  Source // its own text and references
}

// Schema is one compiled registry schema.
type Schema interface {
	// Root is the Iceberg type of the schema's values, field ids unset (see the
	// package doc). Callers must not modify it; each call may return the same value.
	Root() iceberg.Type
	// Bind returns a decoder of this schema's encoded values into target (see the
	// package doc), or a *Conflict when a field cannot be read as the target's type.
	Bind(target iceberg.Type) (Decoder, error)
}

// Decoder decodes one encoded value (the payload after any wire prefix) into v, in the
// shape of the target type it was bound to, reusing v's memory. It returns "" when the
// value decoded, or why not (then v's contents are undefined; the caller nulls them).
// The bytes in v may alias data and the decoder's own memory: they stay valid until the
// next Decode. A Decoder is not safe for concurrent use.
//
// Shapes (rowcodec.Value): a struct holds its fields in target order in Elems; a list its
// elements; a map its entries, each a Value{Valid: true, Elems: [key, value]}; a
// primitive as rowcodec.Value documents (fixed(L) and uuid as L or 16 bytes).
type Decoder interface {
	Decode(data []byte, v *rowcodec.Value) string
}

// Conflict is a field whose type in a schema cannot be read as the table's type for it
// (and the table cannot widen to it): e.g. string in the schema, int in the table. Bind
// returns it as an error (*Conflict).
type Conflict = tableschema.Conflict

// Promotable reports whether a value of Iceberg primitive type from can be read as
// primitive type to: equal types, and Iceberg's type promotions int→long,
// float→double and decimal(P,S)→decimal(P2,S) with P2 ≥ P.
func Promotable(from, to iceberg.Type) bool { return tableschema.Promotable(from, to) }
