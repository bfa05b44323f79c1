// Package jsonfmt is the JSON Schema format of pkg/schemafmt: Compile maps a Schema
// Registry JSON Schema (drafts 4 to 2020-12; draft 7 when $schema is absent or unknown,
// as in Confluent's registry) to an Iceberg type, and Bind decodes JSON documents
// written with it into a table's type, keeping schemafmt's contract.
//
// Design notes: docs/design/json-schema-mapping.md.
package jsonfmt
