package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// strictKeys checks a JSON value against the Go type it decodes into, for
// what encoding/json lets pass: a key it matches to a field in another
// case ("ARGS" for args) and a key given twice (the last wins). A proxy
// or a filter in front of the daemon reads the JSON as written, and
// must not read a request otherwise than the daemon does (found by a
// tester). Unknown keys are DisallowUnknownFields' to refuse; values of a
// type with its own UnmarshalJSON, of an interface or a json.RawMessage
// are checked for duplicate keys only.
func strictKeys(raw []byte, t reflect.Type) error {
	return strictValue(json.NewDecoder(bytes.NewReader(raw)), t, "")
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

func strictValue(dec *json.Decoder, t reflect.Type, at string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(unmarshaler) || t.Kind() == reflect.Interface) {
		t = nil // its keys are its own
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = map[string]reflect.Type{}
			jsonFields(t, fields)
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			if seen[key] {
				return fmt.Errorf("field %q is given twice", at+key)
			}
			seen[key] = true
			var sub reflect.Type
			switch {
			case fields != nil:
				ft, ok := fields[key]
				if !ok {
					for name := range fields {
						if strings.EqualFold(name, key) {
							return fmt.Errorf("field %q: the field is %q (names are case-sensitive)", at+key, at+name)
						}
					}
				}
				sub = ft
			case t != nil && t.Kind() == reflect.Map:
				sub = t.Elem()
			}
			if err := strictValue(dec, sub, at+key+"."); err != nil {
				return err
			}
		}
	case '[':
		var sub reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			sub = t.Elem()
		}
		for dec.More() {
			if err := strictValue(dec, sub, at); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// jsonFields adds the JSON names of struct type t's fields, those of
// embedded structs without a name of their own included, to out.
func jsonFields(t reflect.Type, out map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && tag == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				jsonFields(ft, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
}
