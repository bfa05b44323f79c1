// Package jsonfmt is the JSON Schema format of pkg/schemafmt: Compile maps a Schema
// Registry JSON Schema (drafts 4 to 2020-12; draft 7 when $schema is absent or unknown,
// as in Confluent's registry) to an Iceberg type, and Bind decodes JSON documents
// written with it into a table's type, keeping schemafmt's contract.
//
// # Loading
//
// Schemas are loaded and their $refs resolved by github.com/santhosh-tekuri/jsonschema,
// which also checks them against their draft's meta-schema; nothing is fetched from the
// file system or the network. The root lives at mem://input/ unless it has an $id (as
// in Confluent's clients), and each reference at its name resolved against the referring
// document's base. Because Confluent's Java client resolves every name against the
// root's $id, and a referenced schema may be named by its own $id, both are accepted
// too. Regular expressions (pattern, patternProperties) are not parsed: they constrain
// values, not shape, and are often ECMA or Java syntax that Go's regexp refuses.
//
// # Mapping
//
// Every field, list element and map value is optional; map keys are strings. A schema
// that is an object with properties is a struct: its properties, in the order the
// schema text lists them, are the table's columns. Any other root schema is the type of
// the table's one value column.
//
//	JSON Schema                               Iceberg
//	object with properties                    struct of the properties, in document order
//	object without properties, with           map<string, V>
//	  additionalProperties/patternProperties
//	  schemas that all map to V
//	object without either; or with value      string holding JSON
//	  schemas of different types
//	array with items: S                       list<S>
//	array without items; tuple (prefixItems,  list<string holding JSON>
//	  or items: [...] before 2020-12)
//	string                                    string
//	string, format date-time / date / time    timestamptz / date / time
//	string, format uuid                       uuid
//	integer / number / boolean                long / double / boolean
//	type [X, "null"]; oneOf/anyOf [X, null]   X
//	enum / const                              the type of the values (all strings: string;
//	                                          all integers: long; all numbers: double;
//	                                          all booleans: boolean; else string holding JSON)
//	allOf                                     merged (below)
//	oneOf/anyOf, branches of several shapes   string holding JSON
//	type of several non-null types            string holding JSON
//	{}, true, false, untyped, null            string holding JSON
//	$recursiveRef, $dynamicRef                string holding JSON
//
// Details:
//
//   - Without "type", the type is inferred: from enum/const values, else from keywords
//     (properties/patternProperties/additionalProperties: object; items/prefixItems:
//     array), as Confluent's tools do. Constraints (minimum, pattern, required, not,
//     if/then/else, dependentSchemas, unevaluated*, ...) do not change the type and are
//     not checked: Mink reads data, it does not validate it.
//   - An object with properties ignores additionalProperties and patternProperties: the
//     declared properties are the columns and other keys are dropped, as any unknown key.
//   - allOf, and $ref with siblings (draft 2019-09 and later), merge their parts: parts of
//     one shape are that shape; object parts merge into one struct ($ref target first,
//     then allOf members in order, then the schema's own properties, then a oneOf/anyOf
//     branch) provided a property in several parts has one type; a bare "type": "object"
//     or an array without items gives way to a part of its kind that says more. Anything
//     else is string holding JSON.
//   - A oneOf/anyOf drops its null-only branches: [X, null] is an optional X, as
//     Jackson's and pydantic's generators write optional fields. A branch that admits
//     anything ({}) makes the combinator say nothing. Branches that all map to one shape
//     (integers with different bounds, objects that differ in "required") are that shape,
//     merged as allOf with the rest of the schema. Branches of different shapes are a
//     union Iceberg cannot hold: the value is kept as JSON text, whatever the branches
//     hold (a recursive union is fine).
//   - A $ref cycle that the mapping has to follow (a property, item or value type that
//     contains itself) is refused, naming the recursive definition.
//
// # Decoding
//
// A document is read in one pass without building a tree. Null reads as null for every
// type, a string holding JSON included; a missing property is null; a property the
// target lacks, or the schema does not declare, is skipped. Of a key given twice the
// last value counts (for structs and maps alike). Values must be of the schema's JSON
// type, or the reason names the field path and what was expected:
//
//   - integer: an exact integer within int64 (1e3 and 10.0 are; 1.5 is not).
//   - number: a JSON number within double's range (rounded to nearest; 1e400 is refused).
//   - date-time: RFC 3339 (T or t, Z or z or ±hh:mm; the fraction is truncated to
//     microseconds; no leap seconds). Without an offset it is refused: a timestamptz is
//     an instant.
//   - date: YYYY-MM-DD. time: hh:mm:ss[.fraction], with or without an offset; with one it
//     is converted to UTC, wrapping around midnight.
//   - uuid: 8-4-4-4-12 hex digits, either case.
//   - string: valid UTF-8 once unescaped (lone surrogate escapes become U+FFFD).
//   - string holding JSON: the value's JSON text without insignificant whitespace,
//     otherwise exactly as written (escapes and number spellings kept), so it is
//     deterministic.
//
// Malformed JSON (anything RFC 8259 refuses), nesting deeper than 1000 levels and data
// after the document are reasons too ("malformed JSON at byte 17: ..."); a syntax error
// outranks a wrong value before it. Reasons are constant text, the path and input bytes.
package jsonfmt
