package native

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

// fill sets every exported field reachable from v to a value that is not
// its zero value, different from field to field, so that a round trip
// that drops or swaps a field shows. Fields named in skip are left zero.
func fill(t testing.TB, v reflect.Value, n *int, skip map[string]bool) {
	*n++
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n, skip)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() || skip[v.Type().Name()+"."+f.Name] {
				continue
			}
			fill(t, v.Field(i), n, skip)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(t, v.Index(0), n, skip)
		fill(t, v.Index(1), n, skip)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(t, k, n, skip)
			fill(t, e, n, skip)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)) + string(rune('0'+*n%10)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n) * -1000003)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n) * 7919)
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.25)
	default:
		t.Fatalf("fill: no rule for %s", v.Type())
	}
}

func TestCodecRoundTrip(t *testing.T) {
	var n int
	var is initSpec
	// The profiles stay on the host; init gets them compiled (Filters).
	// CountCPU is the host's business (the sandbox's cgroup), and so is
	// CheckFirstExec (the direct start's plan, made on the host; the
	// init stage sends init's first exec to the check anyway).
	fill(t, reflect.ValueOf(&is).Elem(), &n, map[string]bool{"Spec.Seccomp": true, "Spec.CountCPU": true, "Spec.CheckFirstExec": true})
	b := encodeInitSpec(&is)
	frame, err := readFrame(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeInitSpec(frame)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, is) {
		t.Errorf("initSpec round trip:\n got %+v\nwant %+v", *got, is)
	}

	var m message
	fill(t, reflect.ValueOf(&m).Elem(), &n, nil)
	frame, err = readFrame(bytes.NewReader(encodeMessage(&m)))
	if err != nil {
		t.Fatal(err)
	}
	gm, err := decodeMessage(frame)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gm, m) {
		t.Errorf("message round trip:\n got %+v\nwant %+v", gm, m)
	}
}

// TestCodecRejectsDamage: every truncation of a frame, and a frame with a
// byte too many, is an error, never a panic or a silently partial Spec.
func TestCodecRejectsDamage(t *testing.T) {
	var n int
	var is initSpec
	fill(t, reflect.ValueOf(&is).Elem(), &n, map[string]bool{"Spec.Seccomp": true})
	frame := encodeInitSpec(&is)[4:]
	for i := 0; i < len(frame); i++ {
		if _, err := decodeInitSpec(frame[:i]); err == nil {
			t.Fatalf("a frame cut to %d of %d bytes decoded without error", i, len(frame))
		}
	}
	if _, err := decodeInitSpec(append(frame[:len(frame):len(frame)], 0)); err == nil {
		t.Error("a frame with a trailing byte decoded without error")
	}
	// A length above the limit is refused before anything is allocated.
	if _, err := readFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0x7f})); err == nil {
		t.Error("a 2 GiB frame length was accepted")
	}
	if _, err := readFrame(bytes.NewReader([]byte{10, 0, 0, 0, 1})); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a frame cut short: got %v, want unexpected EOF", err)
	}
}

func FuzzDecodeInitSpec(f *testing.F) {
	var n int
	var is initSpec
	fill(f, reflect.ValueOf(&is).Elem(), &n, map[string]bool{"Spec.Seccomp": true})
	f.Add(encodeInitSpec(&is)[4:])
	f.Add(encodeInitSpec(&initSpec{})[4:])
	// Whatever init is sent, it decodes or errs: it never panics.
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeInitSpec(b)
		decodeMessage(b)
	})
}
