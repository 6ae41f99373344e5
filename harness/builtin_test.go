package harness

import (
	"slices"
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestBuiltinNeeds checks that the built-in rules keep their word lists:
// the common commands of a program they are about (git status) are
// decided without compiling the rule's regular expression, and a line
// with one of the words still reaches it.
func TestBuiltinNeeds(t *testing.T) {
	want := map[string][]string{
		"git-push":        {"push"},
		"package-publish": {"publish", "push", "upload"},
		"image-push":      {"push"},
		"deploy":          {"apply", "delete", "create", "replace", "patch", "scale", "rollout", "destroy", "install", "upgrade", "uninstall", "rollback"},
		"github-release":  {"create", "merge"},
	}
	for _, r := range builtinSet(policy.BuiltinIrreversible) {
		if w, ok := want[r.ref.Name]; ok && !slices.Equal(r.needs, w) {
			t.Errorf("%s: needs %q, want %q", r.ref.Name, r.needs, w)
		}
	}
	// A rule of its own, so that no other test has compiled it yet.
	var gitPush *rule
	for _, r := range builtinSet(policy.BuiltinIrreversible) {
		if r.ref.Name == "git-push" {
			gitPush = &rule{ref: r.ref, r: r.r, kind: r.kind, programs: r.programs, needs: r.needs}
		}
	}
	if gitPush.match([]string{"git", "status"}) || gitPush.re != nil {
		t.Errorf("git status: matched or compiled git-push's expression (re %v)", gitPush.re)
	}
	if !gitPush.match([]string{"git", "push"}) {
		t.Error("git push: no match")
	}
}
