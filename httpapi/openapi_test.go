package httpapi_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moatbox/moat/httpapi"
)

// TestOpenAPIMatchesRoutes: every route the handler serves is in
// docs/openapi.yaml, and every operation there is served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	data, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Paths are the keys indented by two under "paths:", methods those
	// indented by four beneath them.
	pathRe := regexp.MustCompile(`^  (/\S*):\s*$`)
	methodRe := regexp.MustCompile(`^    (get|post|put|delete|patch):`)
	var documented []string
	inPaths, cur := false, ""
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "paths:":
			inPaths = true
		case inPaths && line != "" && !strings.HasPrefix(line, " "):
			inPaths = false
		case inPaths && pathRe.MatchString(line):
			cur = pathRe.FindStringSubmatch(line)[1]
		case inPaths && cur != "" && methodRe.MatchString(line):
			documented = append(documented, strings.ToUpper(methodRe.FindStringSubmatch(line)[1])+" "+cur)
		}
	}
	served := httpapi.Routes()
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is served but not in docs/openapi.yaml", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(served, d) {
			t.Errorf("%s is in docs/openapi.yaml but not served", d)
		}
	}
	if len(served) < 10 {
		t.Errorf("only %d routes: the parse found too few", len(served))
	}
}
