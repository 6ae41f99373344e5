package policy

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/moatbox/moat/internal/suggest"
)

// Load reads the policy file at path and parses it with ParseDocument:
// TOML, or JSON as the daemon takes it. Errors about the file's content
// are *Errors; an unreadable file, or one that is not a regular file of
// at most inputfile.MaxPolicy bytes, is returned as the *fs.PathError
// from reading it.
func Load(path string) (*Policy, error) {
	data, err := readPolicy(path)
	if err != nil {
		return nil, err
	}
	return ParseDocument(path, data)
}

// Parse reads the TOML policy document data, named name in errors, over
// Default(): fields the document does not mention keep their defaults, and
// a list it gives replaces the default list (env.set is merged instead, see
// [Env]). The returned policy's Source is name.
//
// Parsing is strict: a syntax error, an unknown key, a value of the wrong
// type and a malformed size or duration are all errors, returned together as
// *Errors, each naming the line and the field. Parse does not validate the
// values; call Validate.
func Parse(name string, data []byte) (*Policy, error) {
	if err := notUTF8(name, data); err != nil {
		return nil, err
	}
	data = withoutBOM(data)
	p := Default()
	p.Source = name

	// The keys are counted, and their lines found, before go-toml decodes
	// the document: its check for keys defined twice scans every key seen
	// so far, which makes decoding quadratic in the number of keys.
	lines, zeros, err := keyLines(data)
	var many *tooManyKeysError
	if errors.As(err, &many) {
		return nil, &Errors{&FieldError{File: name, Line: many.line, Msg: err.Error()}}
	}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, syntaxError(name, err)
	}
	if err != nil {
		return nil, syntaxError(name, err)
	}
	p.lines = lines

	d := decoder{errorList: errorList{p: p}, zeros: zeros}
	d.table("", doc, reflect.ValueOf(p).Elem())
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
	if err := d.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// syntaxError turns an error of go-toml into *Errors.
func syntaxError(name string, err error) error {
	fe := &FieldError{File: name, Msg: "syntax error: " + err.Error()}
	var de *toml.DecodeError
	var pe *unstable.ParserError
	switch {
	case errors.As(err, &de):
		fe.Line, _ = de.Position()
		fe.Msg = "syntax error: " + strings.TrimPrefix(de.Error(), "toml: ")
	case errors.As(err, &pe):
		fe.Msg = "syntax error: " + pe.Message
	}
	return &Errors{fe}
}

// maxKeys is the most keys (counting each part of a dotted key, and the
// keys of inline tables) a policy may have. Moat's schema has a few dozen;
// env.set adds one per variable. The bound keeps go-toml's quadratic check
// for keys defined twice (see Parse) to a few milliseconds.
const maxKeys = 4096

// maxKeyBytes bounds the length of every key of a policy together, each
// written out whole ("network.allow[3]"): a dotted key of many parts, or
// a long one before many others, is as many keys again, each as long as
// all its parts, and was read in time and memory that grew with the
// square of its length (a 1 MB file took gigabytes).
const maxKeyBytes = 4 << 20

// tooManyKeysError is a document with more than maxKeys keys, or keys
// longer than maxKeyBytes together (long).
type tooManyKeysError struct {
	line int
	long bool
}

func (e *tooManyKeysError) Error() string {
	if e.long {
		return fmt.Sprintf("keys of more than %d bytes in all, each written out whole (a.b.c); a policy needs far fewer", maxKeyBytes)
	}
	return fmt.Sprintf("more than %d keys; a policy needs far fewer", maxKeys)
}

// keyLines maps every dotted key of the document to the line it is written
// on: table headers, keys, array elements ("a.b[2]") and the keys of inline
// tables. Arrays of tables are numbered like arrays ("a[0].b"). A document
// with more than maxKeys keys is a *tooManyKeysError at the first key past
// the bound. zeros maps the keys whose value is a float too small for a
// float64, which go-toml reads as 0, to its text (see errZeroNumber).
func keyLines(data []byte) (lines map[string]int, zeros map[string]string, err error) {
	lines = make(map[string]int)
	zeros = make(map[string]string)
	var p unstable.Parser
	p.Reset(data)
	var starts []int // offsets of the lines after the first
	for i, c := range data {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	lineAt := func(r unstable.Range) int {
		return 1 + sort.SearchInts(starts, int(r.Offset)+1)
	}
	keys, keyBytes := 0, 0
	var tooMany error
	record := func(key string, line int) {
		if keyBytes += len(key); keyBytes > maxKeyBytes && tooMany == nil {
			tooMany = &tooManyKeysError{line: line, long: true}
		}
		if _, ok := lines[key]; !ok && tooMany == nil {
			lines[key] = line
		}
	}
	// keyParts records every prefix of a dotted key and returns the whole.
	keyParts := func(prefix string, it unstable.Iterator) (string, int) {
		key, line := prefix, 0
		for tooMany == nil && it.Next() {
			n := it.Node()
			line = lineAt(n.Raw)
			if keys++; keys > maxKeys && tooMany == nil {
				tooMany = &tooManyKeysError{line: line}
			}
			key = joinKey(key, string(n.Data))
			record(key, line)
		}
		return key, line
	}
	// value records key and, up to maxDepth levels of arrays and inline
	// tables deep (a policy needs three: workspace = { protect = [".idea"] }),
	// the keys inside its value.
	const maxDepth = 4
	var value func(key string, n *unstable.Node, line, depth int)
	value = func(key string, n *unstable.Node, line, depth int) {
		if n.Raw.Length > 0 {
			line = lineAt(n.Raw)
		}
		record(key, line)
		if n.Kind == unstable.Float && zeroFloat(string(n.Data)) {
			zeros[key] = string(n.Data)
		}
		if depth == maxDepth || tooMany != nil {
			return
		}
		switch n.Kind {
		case unstable.Array:
			i := 0
			for it := n.Children(); tooMany == nil && it.Next(); {
				if c := it.Node(); c.Kind != unstable.Comment {
					value(indexKey(key, i), c, line, depth+1)
					i++
				}
			}
		case unstable.InlineTable:
			for it := n.Children(); tooMany == nil && it.Next(); {
				if kv := it.Node(); kv.Kind == unstable.KeyValue {
					k, l := keyParts(key, kv.Key())
					value(k, kv.Value(), l, depth+1)
				}
			}
		}
	}

	table := ""
	arrayCount := make(map[string]int)
	for tooMany == nil && p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			table, _ = keyParts("", e.Key())
		case unstable.ArrayTable:
			k, line := keyParts("", e.Key())
			table = indexKey(k, arrayCount[k])
			arrayCount[k]++
			record(table, line)
		case unstable.KeyValue:
			k, line := keyParts(table, e.Key())
			value(k, e.Value(), line, 0)
		}
	}
	if tooMany != nil {
		return nil, nil, tooMany
	}
	return lines, zeros, p.Error()
}

// decoder assigns a generic TOML document (as decoded into map[string]any)
// to the fields of a Policy, recording an error for every key it cannot
// assign and carrying on with the others.
type decoder struct {
	errorList
	// zeros maps the keys whose value is a float written non-zero that
	// reads as 0 to its text: refused, as 0 would mean no limit.
	zeros map[string]string
}

var (
	sizeType     = reflect.TypeFor[Size]()
	durationType = reflect.TypeFor[Duration]()
)

// table assigns the keys of t to the fields of the struct dst, found by
// their toml tags.
func (d *decoder) table(key string, t map[string]any, dst reflect.Value) {
	fields := make(map[string]reflect.Value)
	var known []string
	for i := 0; i < dst.NumField(); i++ {
		tag, _, _ := strings.Cut(dst.Type().Field(i).Tag.Get("toml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = dst.Field(i)
		known = append(known, tag)
	}
	for _, k := range sortedKeys(t) {
		field := joinKey(key, k)
		f, ok := fields[k]
		if !ok {
			d.add(field, unknownKeyMsg(key, k, known))
			continue
		}
		d.value(field, t[k], f)
	}
}

// value assigns the TOML value v to dst, of one of the types used in Policy.
func (d *decoder) value(key string, v any, dst reflect.Value) {
	if text, ok := d.zeros[key]; ok {
		d.add(key, fmt.Sprintf("%s %v", text, errZeroNumber))
		return
	}
	switch dst.Type() {
	case sizeType:
		d.size(key, v, dst)
		return
	case durationType:
		d.duration(key, v, dst)
		return
	case portsType:
		d.ports(key, v, dst)
		return
	case rulesType, secretsType:
		d.tables(key, v, dst)
		return
	case argvListType:
		d.argvList(key, v, dst)
		return
	}
	switch dst.Kind() {
	case reflect.Struct:
		t, ok := v.(map[string]any)
		if !ok {
			d.add(key, "expected a table, got "+describe(v))
			return
		}
		d.table(key, t, dst)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			d.add(key, "expected a string, got "+describe(v))
			return
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			d.add(key, "expected true or false, got "+describe(v))
			return
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, ok := v.(int64)
		if !ok {
			d.add(key, "expected an integer, got "+describe(v))
			return
		}
		dst.SetInt(n)
	case reflect.Float64:
		switch n := v.(type) {
		case int64:
			dst.SetFloat(float64(n))
		case float64:
			dst.SetFloat(n)
		default:
			d.add(key, "expected a number, got "+describe(v))
		}
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			d.add(key, "expected an array of strings, got "+describe(v))
			return
		}
		list := make([]string, 0, len(a))
		for i, e := range a {
			s, ok := e.(string)
			if !ok {
				d.add(indexKey(key, i), "expected a string, got "+describe(e))
				continue
			}
			list = append(list, s)
		}
		dst.Set(reflect.ValueOf(list))
	case reflect.Map:
		// A table of strings (env.set) or of integers (budgets.requests).
		ints := dst.Type().Elem().Kind() == reflect.Int
		t, ok := v.(map[string]any)
		if !ok {
			what := "strings"
			if ints {
				what = "integers"
			}
			d.add(key, "expected a table of "+what+", got "+describe(v))
			return
		}
		if dst.IsNil() {
			dst.Set(reflect.MakeMap(dst.Type()))
		}
		for _, k := range sortedKeys(t) {
			if ints {
				n, ok := t[k].(int64)
				if !ok {
					d.add(joinKey(key, k), "expected an integer, got "+describe(t[k]))
					continue
				}
				dst.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(int(n)))
				continue
			}
			s, ok := t[k].(string)
			if !ok {
				d.add(joinKey(key, k), "expected a string, got "+describe(t[k]))
				continue
			}
			dst.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(s))
		}
	default:
		panic(fmt.Sprintf("policy: field %s has unsupported type %s", key, dst.Type()))
	}
}

// portsType is an optional list of ports: nil when the key is absent.
var portsType = reflect.TypeFor[*[]int]()

func (d *decoder) ports(key string, v any, dst reflect.Value) {
	a, ok := v.([]any)
	if !ok {
		d.add(key, "expected an array of port numbers, got "+describe(v))
		return
	}
	list := make([]int, 0, len(a))
	for i, e := range a {
		n, ok := e.(int64)
		if !ok || n != int64(int(n)) {
			d.add(indexKey(key, i), "expected a port number, got "+describe(e))
			continue
		}
		list = append(list, int(n))
	}
	dst.Set(reflect.ValueOf(&list))
}

func (d *decoder) size(key string, v any, dst reflect.Value) {
	switch n := v.(type) {
	case string:
		s, err := ParseSize(n)
		if err != nil {
			d.add(key, err.Error())
			return
		}
		dst.SetInt(int64(s))
	case int64:
		if n < 0 {
			d.add(key, fmt.Sprintf("invalid size %d: must not be negative", n))
			return
		}
		dst.SetInt(n)
	default:
		d.add(key, `expected a size (a number of bytes, or a string such as "512MiB"), got `+describe(v))
	}
}

func (d *decoder) duration(key string, v any, dst reflect.Value) {
	var (
		dur Duration
		err error
	)
	switch n := v.(type) {
	case string:
		dur, err = ParseDuration(n)
	case int64:
		if n > math.MaxInt64/int64(time.Second) || n < 0 {
			dur, err = secondsDuration(float64(n))
		} else {
			dur = Duration(n * int64(time.Second))
		}
	case float64:
		dur, err = secondsDuration(n)
	default:
		d.add(key, `expected a duration (a number of seconds, or a string such as "90s" or "10m"), got `+describe(v))
		return
	}
	if err != nil {
		if _, ok := v.(string); !ok {
			err = fmt.Errorf("invalid duration %v: %w", v, err)
		}
		d.add(key, err.Error())
		return
	}
	dst.SetInt(int64(dur))
}

func unknownKeyMsg(table, key string, known []string) string {
	where := "at the top level"
	if table != "" {
		where = "in [" + table + "]"
	}
	msg := "unknown key (known keys " + where + ": " + strings.Join(known, ", ") + ")"
	if s := suggest.Closest(key, known, 2); s != "" {
		msg = "unknown key, did you mean " + s + "? (known keys " + where + ": " + strings.Join(known, ", ") + ")"
	}
	return msg
}

// describe names the TOML type of a decoded value, with the value when short.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		if len(v) > 40 {
			return "a string"
		}
		return fmt.Sprintf("string %q", v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return fmt.Sprintf("float %v", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	default:
		return "a date or time"
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// withoutBOM drops a UTF-8 byte order mark at the start of a document,
// which some editors write and neither TOML nor JSON allows: the
// document is read as its author sees it.
// notUTF8 refuses a document in UTF-16 or UTF-32 (a byte-order mark of
// theirs, or a NUL in its first character, which no UTF-8 policy has),
// which the parser would read as a bad first key.
func notUTF8(name string, data []byte) error {
	var enc string
	switch {
	case bytes.HasPrefix(data, []byte("\x00\x00\xfe\xff")), bytes.HasPrefix(data, []byte("\xff\xfe\x00\x00")):
		enc = "UTF-32"
	case bytes.HasPrefix(data, []byte("\xfe\xff")), bytes.HasPrefix(data, []byte("\xff\xfe")):
		enc = "UTF-16"
	case len(data) >= 2 && (data[0] == 0 || data[1] == 0):
		enc = "UTF-16 or UTF-32"
	default:
		return nil
	}
	return &Errors{&FieldError{File: name, Line: 1, Msg: "the file is in " + enc + "; moat reads a policy as UTF-8: save it as UTF-8"}}
}

func withoutBOM(data []byte) []byte {
	return bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
}
