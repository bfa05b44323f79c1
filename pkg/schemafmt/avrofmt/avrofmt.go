// Package avrofmt is the Avro format of schemafmt: Confluent Schema Registry Avro
// schemas compiled to Iceberg types, and decoders from Avro binary values (the payload
// after the Confluent wire prefix) into rowcodec values.
//
// Design notes: docs/design/avro-mapping.md.
package avrofmt

import (
	"errors"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/hamba/avro/v2"

	"github.com/minkhq/mink/pkg/schemafmt"
)

// Compile parses an Avro schema with its references and maps it to Iceberg (see the
// package doc). The references, and theirs, are parsed first, so the schema can name the
// types they define.
func Compile(src schemafmt.Source) (_ schemafmt.Schema, err error) {
	// Schema text comes from the registry, not from us: a parser bug must not take the
	// process down with it.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("invalid Avro schema: the parser failed: %v", r)
		}
	}()
	// A cache of our own: hamba's default cache is process-wide, and a type name defined
	// by one subject must not leak into another's schema.
	cache := &avro.SchemaCache{}
	if err := addReferences(src.References, cache, map[string]bool{}); err != nil {
		return nil, err
	}
	as, err := avro.ParseWithCache(src.Text, "", cache)
	if err != nil {
		return nil, fmt.Errorf("invalid Avro schema: %w", err)
	}
	var c compiler
	root, err := c.build(as, "", true)
	if err != nil {
		return nil, err
	}
	if root.typ == nil {
		return nil, errors.New("the Avro schema's values are always null: nothing to map")
	}
	return &schema{root: root}, nil
}

// addReferences parses refs depth first into cache. done holds the names already
// parsed or being parsed, so shared references are parsed once and cycles end.
func addReferences(refs []schemafmt.Reference, cache *avro.SchemaCache, done map[string]bool) error {
	for _, r := range refs {
		if done[r.Name] {
			continue
		}
		done[r.Name] = true
		if err := addReferences(r.Source.References, cache, done); err != nil {
			return err
		}
		if _, err := avro.ParseWithCache(r.Source.Text, "", cache); err != nil {
			return fmt.Errorf("reference %q (subject %q version %d): invalid Avro schema: %w",
				r.Name, r.Subject, r.Version, err)
		}
		if cache.Get(r.Name) == nil {
			return fmt.Errorf("reference %q (subject %q version %d) does not define type %q",
				r.Name, r.Subject, r.Version, r.Name)
		}
	}
	return nil
}

// schema is a compiled Avro schema. It is immutable, so safe for concurrent use.
type schema struct {
	root *wnode
}

func (s *schema) Root() iceberg.Type { return s.root.typ }

func (s *schema) Bind(target iceberg.Type) (schemafmt.Decoder, error) {
	if target == nil {
		return nil, errors.New("avrofmt: Bind needs a target type")
	}
	p, err := bind(s.root, target)
	if err != nil {
		return nil, err
	}
	return &decoder{root: p}, nil
}
