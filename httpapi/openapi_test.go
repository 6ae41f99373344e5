package httpapi_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moatbox/moat/httpapi"
	"go.yaml.in/yaml/v3"
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

// TestOpenAPIErrorCodes: the error codes docs/openapi.yaml lists are the
// client package's stable codes, no more and no fewer.
func TestOpenAPIErrorCodes(t *testing.T) {
	data, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)code:\s*type: string\s*enum: \[([^\]]*)\]`).FindSubmatch(data)
	if m == nil {
		t.Fatal("no enum of error codes in docs/openapi.yaml")
	}
	var documented []string
	for _, c := range strings.Split(string(m[1]), ",") {
		documented = append(documented, strings.TrimSpace(c))
	}
	src, err := os.ReadFile("../client/types.go")
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, c := range regexp.MustCompile(`(?m)^\s*Code\w+\s*=\s*"([a-z_]+)"`).FindAllSubmatch(src, -1) {
		codes = append(codes, string(c[1]))
	}
	if len(codes) < 10 {
		t.Fatalf("found only %d codes in client/types.go: %v", len(codes), codes)
	}
	for _, c := range codes {
		if !slices.Contains(documented, c) {
			t.Errorf("error code %q is not in docs/openapi.yaml", c)
		}
	}
	for _, c := range documented {
		if !slices.Contains(codes, c) {
			t.Errorf("docs/openapi.yaml lists error code %q, which the client does not define", c)
		}
	}
}

// TestOpenAPIParses: docs/openapi.yaml is YAML a client generator reads
// (a description with ": " in a plain scalar made it invalid, found by a
// tester), with the parts the route check above reads by their indent.
func TestOpenAPIParses(t *testing.T) {
	data, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") || len(doc.Paths) == 0 {
		t.Errorf("docs/openapi.yaml: openapi %q, %d paths", doc.OpenAPI, len(doc.Paths))
	}
}
