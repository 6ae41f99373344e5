package harness

import (
	"sync"

	"github.com/moatbox/moat/policy"
)

// Builtin returns the rules of the built-in set named name (see
// policy.Harness.Builtin), or nil for a name that is not one.
//
// The set "irreversible" asks before what cannot be taken back once it
// has left the machine: publishing, deploying, sending, paying, and
// deleting outside the workspace. Its rules read the command line only;
// they are a net for the common spellings, not a proof (an alias, a
// script or a program's own config can do the same thing unseen).
func Builtin(name string) []policy.Rule {
	if name != policy.BuiltinIrreversible {
		return nil
	}
	set := builtinSet(name)
	out := make([]policy.Rule, len(set))
	for i, r := range set {
		out[i] = r.r
	}
	return out
}

// builtinSet returns the compiled built-in set named name, shared by every
// Rules: a rule's regular expression is compiled the first time a program
// it is about is checked.
func builtinSet(name string) []*rule {
	if name != policy.BuiltinIrreversible {
		return nil
	}
	return irreversible()
}

// needing limits r to command lines with one of words among their
// arguments, so that the common commands of a program (git status) do not
// cost a regular expression's compilation.
func (r *rule) needing(words ...string) *rule {
	r.needs = words
	return r
}

func ask(name string, programs []string, re, reason string, match, notMatch [][]string) *rule {
	return &rule{ref: RuleRef{Set: policy.BuiltinIrreversible, Name: name}, kind: Ask, programs: programs,
		r: policy.Rule{Name: name, Match: policy.Match{CommandRegex: re}, Decision: policy.DecisionAsk,
			Reason: reason, ExamplesMatch: match, ExamplesNotMatch: notMatch}}
}

// The regular expressions see the words joined by spaces, the program by
// its base name (see policy.Match.CommandRegex).
//
// The table is built on first use, not at package initialisation: every
// moat process (the sandbox's init stage too) would pay for it otherwise.
var irreversible = sync.OnceValue(func() []*rule {
	return []*rule{
		ask("git-push", []string{"git"},
			`^git( -[cC] \S+| --\S+)* push( |$)`,
			"git push publishes commits to a remote",
			[][]string{{"git", "push"}, {"git", "push", "origin", "main"}, {"/usr/bin/git", "push"}, {"git", "-C", "repo", "push", "-f"}},
			[][]string{{"git", "status"}, {"git", "log", "push"}, {"git", "pushx"}}).needing("push"),
		ask("package-publish", []string{"npm", "pnpm", "yarn", "bun", "cargo", "gem", "twine", "poetry", "uv", "flit", "hatch"},
			`^((npm|pnpm|yarn|bun) (.* )?publish|cargo (.* )?publish|gem push|twine upload|(poetry|uv|flit|hatch) publish)( |$)`,
			"publishing a package makes it public, and a version cannot be published twice",
			[][]string{{"npm", "publish"}, {"pnpm", "publish", "--access", "public"}, {"yarn", "npm", "publish"}, {"cargo", "publish"}, {"gem", "push", "x.gem"}, {"twine", "upload", "dist/*"}, {"uv", "publish"}},
			[][]string{{"npm", "install"}, {"npm", "install", "publish-tools"}, {"cargo", "build"}, {"gem", "install", "rake"}, {"pip", "install", "twine"}}).needing("publish", "push", "upload"),
		{ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "python-upload"}, kind: Ask, r: policy.Rule{
			Name: "python-upload", Match: policy.Match{Command: []string{"python*", "-m", "twine", "upload"}}, Decision: policy.DecisionAsk,
			Reason:           "publishing a package makes it public, and a version cannot be published twice",
			ExamplesMatch:    [][]string{{"python3", "-m", "twine", "upload", "dist/*"}},
			ExamplesNotMatch: [][]string{{"python3", "step.py"}, {"python3", "-m", "pytest"}},
		}},
		ask("image-push", []string{"docker", "podman"},
			`^(docker|podman) (image )?push( |$)`,
			"pushing an image publishes it to a registry",
			[][]string{{"docker", "push", "repo/app:1"}, {"podman", "image", "push", "x"}},
			[][]string{{"docker", "pull", "alpine"}, {"docker", "build", "."}}).needing("push"),
		ask("deploy", []string{"kubectl", "terraform", "tofu", "helm"},
			`^(kubectl (.* )?(apply|delete|create|replace|patch|scale|rollout)|(terraform|tofu) (-\S+ )*(apply|destroy)|helm (.* )?(install|upgrade|uninstall|delete|rollback))( |$)`,
			"this changes a running deployment",
			[][]string{{"kubectl", "apply", "-f", "x.yaml"}, {"kubectl", "-n", "prod", "delete", "pod", "x"}, {"kubectl", "rollout", "restart", "deploy/x"}, {"terraform", "apply"}, {"terraform", "-chdir=infra", "destroy"}, {"helm", "upgrade", "--install", "x", "."}},
			[][]string{{"kubectl", "get", "pods"}, {"terraform", "plan"}, {"helm", "template", "."}}).needing("apply", "delete", "create", "replace", "patch", "scale", "rollout", "destroy", "install", "upgrade", "uninstall", "rollback"),
		ask("github-release", []string{"gh"},
			`^gh (release create|pr merge)( |$)`,
			"this publishes a release or merges a pull request on GitHub",
			[][]string{{"gh", "release", "create", "v1.0"}, {"gh", "pr", "merge", "12"}},
			[][]string{{"gh", "pr", "view", "12"}, {"gh", "release", "list"}}).needing("create", "merge"),
		ask("send-mail", []string{"sendmail", "mail", "mailx", "mutt", "msmtp", "swaks"},
			`^(sendmail|mail|mailx|mutt|msmtp|swaks)( |$)`,
			"this sends mail",
			[][]string{{"sendmail", "a@example.com"}, {"mail", "-s", "hi", "a@example.com"}, {"mutt"}},
			[][]string{{"mailcap"}, {"git", "send-email"}}),
		ask("http-write", []string{"curl", "wget", "http", "https", "xh", "xhs"},
			`^(curl (.* )?(-[a-zA-Z]*[dFT]|--data|--form|--upload-file( |=|$)|--json( |=|$)|(-X ?|--request[ =]?)(?i:POST|PUT|PATCH|DELETE)( |$))|wget (.* )?--(post-data|post-file|body-data|body-file|method)|(http|https|xh|xhs) (-\S+ )*(POST|PUT|PATCH|DELETE)( |$)|(http|https|xh|xhs) (.* )?[A-Za-z0-9_.-]+(=[^=]|=$|:=|@))`,
			"this sends data to a server, or asks it to change something",
			[][]string{{"curl", "-d", "a=1", "https://x"}, {"curl", "--data-binary", "@f", "https://x"}, {"curl", "-X", "POST", "https://x"}, {"curl", "-XDELETE", "https://x"}, {"curl", "-sF", "f=@x", "https://x"}, {"curl", "--json", "{}", "https://x"}, {"wget", "--post-data=a=1", "https://x"}, {"http", "POST", "x.org"}, {"http", "x.org", "name=me"}},
			[][]string{{"curl", "https://x"}, {"curl", "-fsSL", "-o", "out", "https://x"}, {"curl", "-X", "GET", "https://x"}, {"wget", "https://x"}, {"http", "x.org"}, {"http", "x.org", "q==search"}}),
		ask("delete-outside", []string{"rm"},
			`^rm( \S+)* (-[a-zA-Z]*[rRf][a-zA-Z]*|--recursive|--force)( \S+)* ([/~]\S*|\.\.(/\S*)?)( |$)|^rm( \S+)* ([/~]\S*|\.\.(/\S*)?)( \S+)* (-[a-zA-Z]*[rRf][a-zA-Z]*|--recursive|--force)( |$)`,
			"rm -r or -f of an absolute path, ~ or .. reaches outside the workspace",
			[][]string{{"rm", "-rf", "/"}, {"rm", "-r", "~/x"}, {"rm", "-rf", "../other"}, {"rm", "-f", "/etc/x"}, {"rm", "/x", "-rf"}, {"rm", "--recursive", ".."}},
			[][]string{{"rm", "-rf", "build"}, {"rm", "-rf", "./dist"}, {"rm", "/tmp/file"}, {"rm", "-rf", "a/../b"}}),
		ask("payments-messaging", []string{"stripe", "twilio", "aws"},
			`^((stripe|twilio)|aws (.* )?(ses|sesv2|sns publish))( |$)`,
			"payment and messaging services move money or reach people",
			[][]string{{"stripe", "charges", "create"}, {"twilio", "api:core:messages:create"}, {"aws", "ses", "send-email"}, {"aws", "--region", "eu-west-1", "sesv2", "send-email"}, {"aws", "sns", "publish", "--message", "x"}},
			[][]string{{"aws", "s3", "ls"}, {"aws", "sns", "list-topics"}}),
	}
})
