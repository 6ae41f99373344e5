package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"value", "valueTwo", "op", "index", "names"}
	for _, tc := range []struct{ in, want string }{
		{"val", "value"}, {"Names", "names"}, {"indx", "index"}, {"xyz", ""}, {"op", "op"},
	} {
		if got := Closest(tc.in, known, 2); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if d := Distance("kitten", "sitting"); d != 3 {
		t.Errorf("Distance = %d, want 3", d)
	}
}
