package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// ParseDocument parses a policy written either as TOML (Parse) or as a
// JSON object (ParseJSON): a document whose first character other than
// white space is "{" is JSON, which a TOML document cannot start with.
func ParseDocument(name string, data []byte) (*Policy, error) {
	if err := notUTF8(name, data); err != nil {
		return nil, err
	}
	data = withoutBOM(data)
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return ParseJSON(name, data)
	}
	return Parse(name, data)
}

// ParseJSON reads a policy written as a JSON object with the keys and
// nesting of the TOML schema ({"limits": {"memory": "512MiB"}}), over
// Default() as Parse does, with the same strictness and the same errors:
// *Errors, each naming the line and the field.
func ParseJSON(name string, data []byte) (*Policy, error) {
	if err := notUTF8(name, data); err != nil {
		return nil, err
	}
	data = withoutBOM(data)
	p := Default()
	p.Source = name
	w := jsonWalker{dec: json.NewDecoder(bytes.NewReader(data)), data: data, lines: map[string]int{}, zeros: map[string]string{}}
	w.dec.UseNumber()
	doc, err := w.document()
	if err != nil {
		fe := &FieldError{File: name, Line: w.line(), Msg: "syntax error: " + err.Error()}
		if many := (*tooManyKeysError)(nil); errors.As(err, &many) {
			fe.Line, fe.Msg = many.line, err.Error() // a bound, not a syntax error
		}
		return nil, &Errors{fe}
	}
	p.lines = w.lines
	d := decoder{errorList: errorList{p: p}, zeros: w.zeros}
	d.table("", doc, reflect.ValueOf(p).Elem())
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
	if err := d.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// jsonWalker decodes a JSON document token by token into the values the
// TOML decoder makes (map[string]any, []any, string, bool, int64,
// float64), recording the line of every key as keyLines does.
type jsonWalker struct {
	dec   *json.Decoder
	data  []byte
	lines map[string]int
	zeros map[string]string // as keyLines's
	keys  int
	// keyBytes: the length of every key recorded, bounded by maxKeyBytes.
	keyBytes int
	elems    int // array elements read, bounded by maxElements
	depth    int // arrays and objects open, bounded by maxDepth
	// lineOff and lineNo: the line of offset lineOff, from which the
	// next line() counts on (the decoder only moves forward).
	lineOff, lineNo int
}

// maxDepth bounds the nesting of a JSON policy: the schema's is a few
// levels, and each level costs a key as long as the path to it, so a
// small document of deep arrays would otherwise take memory that grows
// with the square of its depth (a daemon's request, gigabytes).
const maxDepth = 32

// maxElements bounds the array elements of a JSON policy, each of which
// gets its line recorded as a key does.
const maxElements = 65536

// line is the 1-based line of the decoder's position.
func (w *jsonWalker) line() int {
	off := min(int(w.dec.InputOffset()), len(w.data))
	if off < w.lineOff {
		w.lineOff, w.lineNo = 0, 0
	}
	w.lineNo += bytes.Count(w.data[w.lineOff:off], []byte{'\n'})
	w.lineOff = off
	return 1 + w.lineNo
}

func (w *jsonWalker) document() (map[string]any, error) {
	tok, err := w.dec.Token()
	if err != nil {
		return nil, jsonErr(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("a policy is a JSON object")
	}
	doc, err := w.object("")
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(w.data[w.dec.InputOffset():])) > 0 {
		return nil, fmt.Errorf("data after the policy's object")
	}
	return doc, nil
}

// object reads the members of an object whose "{" has been read.
func (w *jsonWalker) object(key string) (map[string]any, error) {
	t := map[string]any{}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return nil, jsonErr(err)
		}
		k := tok.(string) // json.Decoder reads object keys as strings
		field := joinKey(key, k)
		if _, dup := t[k]; dup {
			return nil, fmt.Errorf("key %s is given twice", field)
		}
		if w.keys++; w.keys > maxKeys {
			return nil, &tooManyKeysError{line: w.line()}
		}
		if w.keyBytes += len(field); w.keyBytes > maxKeyBytes {
			return nil, &tooManyKeysError{line: w.line(), long: true}
		}
		w.lines[field] = w.line()
		if t[k], err = w.value(field); err != nil {
			return nil, err
		}
	}
	_, err := w.dec.Token() // "}"
	return t, jsonErr(err)
}

func (w *jsonWalker) value(key string) (any, error) {
	tok, err := w.dec.Token()
	if err != nil {
		return nil, jsonErr(err)
	}
	switch v := tok.(type) {
	case json.Delim:
		if w.depth++; w.depth > maxDepth {
			return nil, fmt.Errorf("%s: nested more than %d levels deep; a policy needs a few", key, maxDepth)
		}
		defer func() { w.depth-- }()
		if v == '{' {
			return w.object(key)
		}
		var a []any
		for i := 0; w.dec.More(); i++ {
			if w.elems++; w.elems > maxElements {
				return nil, fmt.Errorf("%s: more than %d array elements in the policy; it needs far fewer", key, maxElements)
			}
			elem := indexKey(key, i)
			if w.keyBytes += len(elem); w.keyBytes > maxKeyBytes {
				return nil, &tooManyKeysError{line: w.line(), long: true}
			}
			w.lines[elem] = w.line()
			e, err := w.value(elem)
			if err != nil {
				return nil, err
			}
			a = append(a, e)
		}
		_, err := w.dec.Token() // "]"
		return a, jsonErr(err)
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s: %s is not a number moat can use", key, v)
		}
		if zeroFloat(v.String()) {
			w.zeros[key] = v.String()
		}
		return f, nil
	case nil:
		return nil, fmt.Errorf("%s: null is not a value; leave the key out for its default", key)
	default:
		return v, nil // string, bool
	}
}

// jsonErr turns the decoder's errors into messages: a syntax error, or
// else the end of the input (io.EOF, io.ErrUnexpectedEOF).
func jsonErr(err error) error {
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return errors.New(strings.TrimPrefix(se.Error(), "json: "))
	default:
		return errors.New("unexpected end of the JSON document")
	}
}
