package termsafe

import (
	"encoding/json"
	"testing"
)

// TestJSONControls: DEL and U+0080 to U+009F inside strings become
// escapes that decode to the same text; other text, é (C3 A9) and U+00A0
// (C2 A0) among it, is left as it is (the control).
func TestJSONControls(t *testing.T) {
	in := map[string]string{"c": "a\u009d52;x\u009cb\x7fc", "plain": "é\u00a0ok\u200d€", "rlo": "x\u202egnp.exe\u2066"}
	b, _ := json.Marshal(in)
	got := JSONControls(b)
	want := `{"c":"a\u009d52;x\u009cb\u007fc","plain":"é` + "\u00a0" + `ok` + "\u200d€" + `","rlo":"x\u202egnp.exe\u2066"}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["c"] != in["c"] || back["plain"] != in["plain"] || back["rlo"] != in["rlo"] {
		t.Errorf("decoded %q, %v", back, err)
	}
	if p := []byte(`{"a":"plain"}`); &JSONControls(p)[0] != &p[0] {
		t.Error("control: a text without controls is copied")
	}
}
