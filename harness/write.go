package harness

import (
	"path"
	"slices"
)

// DecideWrite checks a change an API makes to the workspace (a file
// written, a directory made, an entry removed) at rel, a path relative to
// the workspace ("." its root), against the policy's write rules: the
// strongest matching rule decides (deny beats ask beats allow), the first
// of the strongest names the reason; no rule matching allows it. The
// Decision's Command is the path, as one word. Programs inside the
// sandbox write where its mounts let them: these rules are about what a
// client asks the API to change, not about what a command does.
func (rs *Rules) DecideWrite(rel string) Decision {
	rel = path.Clean(rel)
	var found *rule
	for _, r := range rs.writes {
		if (found == nil || r.kind.rank() > found.kind.rank()) && r.r.Match.MatchWrite(rel) {
			found = r
		}
	}
	if found == nil {
		return Decision{Verdict: Allow}
	}
	reason := found.r.Reason
	if reason == "" {
		reason = "rule " + found.ref.String()
	}
	ref := found.ref
	return Decision{Verdict: found.kind, Rule: &ref, Reason: reason, Command: []string{rel}}
}

// HasWriteRules reports whether the policy has write rules: without any,
// every write is allowed.
func (rs *Rules) HasWriteRules() bool { return len(rs.writes) > 0 }

// DecideWrites is DecideWrite over several paths that name one change
// (the path asked for and the one it resolves to through links): the
// strongest decision.
func (rs *Rules) DecideWrites(rels ...string) Decision {
	best := Decision{Verdict: Allow}
	for _, rel := range slices.Compact(slices.Clone(rels)) {
		if d := rs.DecideWrite(rel); d.Verdict.rank() > best.Verdict.rank() {
			best = d
		}
	}
	return best
}
