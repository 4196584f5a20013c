package reassign

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The files are read in two steps: the bytes into a tree of JSON values that remember where each
// began (encoding/json's tokens, so the JSON grammar is the standard library's), then the tree
// against the file's schema (files.go), so that every error can give its line and column and
// the field it is about.

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// value is one JSON value and the byte offset of its first byte.
type value struct {
	kind    kind
	off     int64
	str     string   // kindString; kindNumber: the literal
	elems   []value  // kindArray
	members []member // kindObject, in the file's order
	boolean bool     // kindBool
}

type member struct {
	key    string
	keyOff int64
	val    value
}

// maxDepth bounds nesting: the files are three levels deep, and a deeper file is not one of
// them (nor a reason to recurse a thousand times).
const maxDepth = 64

// parseTree reads b as exactly one JSON value.
func parseTree(b []byte) (value, error) {
	p := &treeParser{src: b, dec: json.NewDecoder(bytes.NewReader(b))}
	p.dec.UseNumber()
	v, err := p.value(0)
	if err != nil {
		return value{}, err
	}
	off := p.start()
	if _, err := p.dec.Token(); err != io.EOF {
		if err != nil {
			return value{}, p.syntax(err)
		}
		return value{}, errorAt(b, off, "", "unexpected data after the top-level value")
	}
	return v, nil
}

type treeParser struct {
	src []byte
	dec *json.Decoder
}

// start is the offset of the next token: past the whitespace and separators after the last one.
func (p *treeParser) start() int64 {
	off := p.dec.InputOffset()
	for off < int64(len(p.src)) {
		switch p.src[off] {
		case ' ', '\t', '\n', '\r', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

// syntax reports a malformed file. The decoder's token stream does not say where the bad byte
// is (its offsets count from the last token), so the whole input is checked again by
// json.Unmarshal, whose offset is absolute: the bad byte is the Offset-th.
func (p *treeParser) syntax(err error) error {
	var se *json.SyntaxError
	if uerr := json.Unmarshal(p.src, new(json.RawMessage)); errors.As(uerr, &se) {
		if strings.Contains(se.Error(), "unexpected end") {
			return errorAt(p.src, int64(len(p.src)), "", "malformed JSON: unexpected end of file")
		}
		return errorAt(p.src, se.Offset-1, "", "malformed JSON: "+trimJSONPrefix(se.Error()))
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errorAt(p.src, int64(len(p.src)), "", "malformed JSON: unexpected end of file")
	}
	return errorAt(p.src, p.dec.InputOffset(), "", "malformed JSON: "+trimJSONPrefix(err.Error()))
}

func trimJSONPrefix(s string) string {
	if len(s) > 6 && s[:6] == "json: " {
		return s[6:]
	}
	return s
}

func (p *treeParser) value(depth int) (value, error) {
	off := p.start()
	tok, err := p.dec.Token()
	if err != nil {
		return value{}, p.syntax(err)
	}
	return p.fromToken(tok, off, depth)
}

func (p *treeParser) fromToken(tok json.Token, off int64, depth int) (value, error) {
	switch t := tok.(type) {
	case nil:
		return value{kind: kindNull, off: off}, nil
	case bool:
		return value{kind: kindBool, off: off, boolean: t}, nil
	case json.Number:
		return value{kind: kindNumber, off: off, str: string(t)}, nil
	case string:
		return value{kind: kindString, off: off, str: t}, nil
	case json.Delim:
		if depth >= maxDepth {
			return value{}, errorAt(p.src, off, "", "nested too deeply")
		}
		if t == '[' {
			v := value{kind: kindArray, off: off}
			for p.dec.More() {
				e, err := p.value(depth + 1)
				if err != nil {
					return value{}, err
				}
				v.elems = append(v.elems, e)
			}
			if _, err := p.dec.Token(); err != nil { // ']'
				return value{}, p.syntax(err)
			}
			return v, nil
		}
		v := value{kind: kindObject, off: off}
		for p.dec.More() {
			koff := p.start()
			k, err := p.dec.Token()
			if err != nil {
				return value{}, p.syntax(err)
			}
			key, _ := k.(string) // the decoder allows only strings here
			e, err := p.value(depth + 1)
			if err != nil {
				return value{}, err
			}
			v.members = append(v.members, member{key: key, keyOff: koff, val: e})
		}
		if _, err := p.dec.Token(); err != nil { // '}'
			return value{}, p.syntax(err)
		}
		return v, nil
	}
	return value{}, errorAt(p.src, off, "", fmt.Sprintf("unexpected token %v", tok))
}

// errorAt makes a *ParseError at byte offset off of src.
func errorAt(src []byte, off int64, field, msg string) *ParseError {
	line, col := position(src, off)
	return &ParseError{Line: line, Column: col, Field: field, Msg: msg}
}

// position converts a byte offset to a 1-based line and column (columns count characters).
func position(src []byte, off int64) (line, col int) {
	if off > int64(len(src)) {
		off = int64(len(src))
	}
	if off < 0 {
		off = 0
	}
	before := src[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	return line, 1 + utf8.RuneCount(before)
}

// schema walks a tree, making errors that name where they are.
type schema struct{ src []byte }

func (s schema) errorf(v value, field, format string, args ...any) error {
	return errorAt(s.src, v.off, field, fmt.Sprintf(format, args...))
}

// object checks that v is an object whose keys are all in fields, each once; it returns the
// members by key. Missing keys are the caller's to check (some are optional).
func (s schema) object(v value, field string, fields ...string) (map[string]value, error) {
	if v.kind != kindObject {
		return nil, s.errorf(v, field, "want an object, got %v", v.kind)
	}
	out := make(map[string]value, len(v.members))
	for _, m := range v.members {
		known := false
		for _, f := range fields {
			known = known || f == m.key
		}
		name := join(field, m.key)
		if !known {
			return nil, errorAt(s.src, m.keyOff, name, fmt.Sprintf("unknown field %q (want %s)", m.key, quoteAll(fields)))
		}
		if _, dup := out[m.key]; dup {
			return nil, errorAt(s.src, m.keyOff, name, fmt.Sprintf("field %q given twice", m.key))
		}
		out[m.key] = m.val
	}
	return out, nil
}

// required is obj[key], or an error at obj's start.
func (s schema) required(obj value, fields map[string]value, field, key string) (value, error) {
	v, ok := fields[key]
	if !ok {
		return value{}, errorAt(s.src, obj.off, join(field, key), fmt.Sprintf("missing field %q", key))
	}
	return v, nil
}

func (s schema) array(v value, field string) ([]value, error) {
	if v.kind != kindArray {
		return nil, s.errorf(v, field, "want an array, got %v", v.kind)
	}
	return v.elems, nil
}

func (s schema) str(v value, field string) (string, error) {
	if v.kind != kindString {
		return "", s.errorf(v, field, "want a string, got %v", v.kind)
	}
	return v.str, nil
}

// int32 reads an integer literal (no fraction, no exponent) that fits an int32.
func (s schema) int32(v value, field string) (int32, error) {
	if v.kind != kindNumber {
		return 0, s.errorf(v, field, "want an integer, got %v", v.kind)
	}
	n, err := strconv.ParseInt(v.str, 10, 32)
	if err != nil {
		return 0, s.errorf(v, field, "want an integer from %d to %d, got %s", int32(-1<<31), int32(1<<31-1), v.str)
	}
	return int32(n), nil
}

// version reads the optional "version" field: absent is 1, as Kafka's tools take it.
func (s schema) version(fields map[string]value) (int, error) {
	v, ok := fields["version"]
	if !ok {
		return 1, nil
	}
	n, err := s.int32(v, "version")
	if err != nil {
		return 0, err
	}
	if n != 1 {
		return 0, s.errorf(v, "version", "unsupported version %d (want 1)", n)
	}
	return 1, nil
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func index(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]" }

func quoteAll(ss []string) string {
	var b bytes.Buffer
	for i, s := range ss {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(s))
	}
	return b.String()
}
