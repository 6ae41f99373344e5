package lookpath

import (
	"slices"
	"testing"
)

func TestDirs(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		def  string
		want []string
	}{
		{[]string{"HOME=/h", "PATH=/a:/b"}, "/d", []string{"/a", "/b"}},
		{[]string{"PATH=/a", "PATH=/b::c"}, "/d", []string{"/b", ".", "c"}}, // the last one, an empty element is .
		{[]string{"HOME=/h"}, "/d:/e", []string{"/d", "/e"}},
		{nil, "", nil},
		{[]string{"PATH="}, "/d", nil},
		{[]string{"XPATH=/x"}, "/d", []string{"/d"}},
	} {
		if got := Dirs(tt.env, tt.def); !slices.Equal(got, tt.want) {
			t.Errorf("Dirs(%q, %q) = %q, want %q", tt.env, tt.def, got, tt.want)
		}
	}
}
