package harness

import "github.com/moatbox/moat/policy"

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
	return irreversible
}

// The regular expressions see the words joined by spaces, the program by
// its base name (see policy.Match.CommandRegex).
//
// The table is a composite literal of constants, which the compiler lays
// out as data: neither the package's initialisation nor a run builds it
// (built by function calls, it cost every run some hundred allocations).
// Keep it so: a function call in it would move the whole table into a
// package initialiser (`GODEBUG=inittrace=1 moat version` lists harness
// once it has one).
var irreversible = []*rule{
	{
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "git-push"}, kind: Ask,
		programs: []string{"git"},
		needs:    []string{"push"},
		r: policy.Rule{Name: "git-push", Match: policy.Match{CommandRegex: `^git( -[cC] \S+| --\S+)* push( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "git push publishes commits to a remote",
			ExamplesMatch:    [][]string{{"git", "push"}, {"git", "push", "origin", "main"}, {"/usr/bin/git", "push"}, {"git", "-C", "repo", "push", "-f"}},
			ExamplesNotMatch: [][]string{{"git", "status"}, {"git", "log", "push"}, {"git", "pushx"}},
		},
	},
	{
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "package-publish"}, kind: Ask,
		programs: []string{"npm", "pnpm", "yarn", "bun", "cargo", "gem", "twine", "poetry", "uv", "flit", "hatch"},
		needs:    []string{"publish", "push", "upload"},
		r: policy.Rule{Name: "package-publish", Match: policy.Match{CommandRegex: `^((npm|pnpm|yarn|bun) (.* )?publish|cargo (.* )?publish|gem push|twine upload|(poetry|uv|flit|hatch) publish)( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "publishing a package makes it public, and a version cannot be published twice",
			ExamplesMatch:    [][]string{{"npm", "publish"}, {"pnpm", "publish", "--access", "public"}, {"yarn", "npm", "publish"}, {"cargo", "publish"}, {"gem", "push", "x.gem"}, {"twine", "upload", "dist/*"}, {"uv", "publish"}},
			ExamplesNotMatch: [][]string{{"npm", "install"}, {"npm", "install", "publish-tools"}, {"cargo", "build"}, {"gem", "install", "rake"}, {"pip", "install", "twine"}},
		},
	},
	{ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "python-upload"}, kind: Ask, r: policy.Rule{
		Name: "python-upload", Match: policy.Match{Command: []string{"python*", "-m", "twine", "upload"}}, Decision: policy.DecisionAsk,
		Reason:           "publishing a package makes it public, and a version cannot be published twice",
		ExamplesMatch:    [][]string{{"python3", "-m", "twine", "upload", "dist/*"}},
		ExamplesNotMatch: [][]string{{"python3", "step.py"}, {"python3", "-m", "pytest"}},
	}},
	{
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "image-push"}, kind: Ask,
		programs: []string{"docker", "podman"},
		needs:    []string{"push"},
		r: policy.Rule{Name: "image-push", Match: policy.Match{CommandRegex: `^(docker|podman) (image )?push( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "pushing an image publishes it to a registry",
			ExamplesMatch:    [][]string{{"docker", "push", "repo/app:1"}, {"podman", "image", "push", "x"}},
			ExamplesNotMatch: [][]string{{"docker", "pull", "alpine"}, {"docker", "build", "."}},
		},
	},
	{
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "deploy"}, kind: Ask,
		programs: []string{"kubectl", "terraform", "tofu", "helm"},
		needs:    []string{"apply", "delete", "create", "replace", "patch", "scale", "rollout", "destroy", "install", "upgrade", "uninstall", "rollback"},
		r: policy.Rule{Name: "deploy", Match: policy.Match{CommandRegex: `^(kubectl (.* )?(apply|delete|create|replace|patch|scale|rollout)|(terraform|tofu) (-\S+ )*(apply|destroy)|helm (.* )?(install|upgrade|uninstall|delete|rollback))( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "this changes a running deployment",
			ExamplesMatch:    [][]string{{"kubectl", "apply", "-f", "x.yaml"}, {"kubectl", "-n", "prod", "delete", "pod", "x"}, {"kubectl", "rollout", "restart", "deploy/x"}, {"terraform", "apply"}, {"terraform", "-chdir=infra", "destroy"}, {"helm", "upgrade", "--install", "x", "."}},
			ExamplesNotMatch: [][]string{{"kubectl", "get", "pods"}, {"terraform", "plan"}, {"helm", "template", "."}},
		},
	},
	{
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "github-release"}, kind: Ask,
		programs: []string{"gh"},
		needs:    []string{"create", "merge"},
		r: policy.Rule{Name: "github-release", Match: policy.Match{CommandRegex: `^gh (release create|pr merge)( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "this publishes a release or merges a pull request on GitHub",
			ExamplesMatch:    [][]string{{"gh", "release", "create", "v1.0"}, {"gh", "pr", "merge", "12"}},
			ExamplesNotMatch: [][]string{{"gh", "pr", "view", "12"}, {"gh", "release", "list"}},
		},
	},
	{
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "send-mail"}, kind: Ask,
		programs: []string{"sendmail", "mail", "mailx", "mutt", "msmtp", "swaks"},
		r: policy.Rule{Name: "send-mail", Match: policy.Match{CommandRegex: `^(sendmail|mail|mailx|mutt|msmtp|swaks)( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "this sends mail",
			ExamplesMatch:    [][]string{{"sendmail", "a@example.com"}, {"mail", "-s", "hi", "a@example.com"}, {"mutt"}},
			ExamplesNotMatch: [][]string{{"mailcap"}, {"git", "send-email"}},
		},
	},
	{
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "http-write"}, kind: Ask,
		programs: []string{"curl", "wget", "http", "https", "xh", "xhs"},
		r: policy.Rule{Name: "http-write", Match: policy.Match{CommandRegex: `^(curl (.* )?(-[a-zA-Z]*[dFT]|--data|--form|--upload-file( |=|$)|--json( |=|$)|(-X ?|--request[ =]?)(?i:POST|PUT|PATCH|DELETE)( |$))|wget (.* )?--(post-data|post-file|body-data|body-file|method)|(http|https|xh|xhs) (-\S+ )*(POST|PUT|PATCH|DELETE)( |$)|(http|https|xh|xhs) (.* )?[A-Za-z0-9_.-]+(=[^=]|=$|:=|@))`}, Decision: policy.DecisionAsk,
			Reason:           "this sends data to a server, or asks it to change something",
			ExamplesMatch:    [][]string{{"curl", "-d", "a=1", "https://x"}, {"curl", "--data-binary", "@f", "https://x"}, {"curl", "-X", "POST", "https://x"}, {"curl", "-XDELETE", "https://x"}, {"curl", "-sF", "f=@x", "https://x"}, {"curl", "--json", "{}", "https://x"}, {"wget", "--post-data=a=1", "https://x"}, {"http", "POST", "x.org"}, {"http", "x.org", "name=me"}},
			ExamplesNotMatch: [][]string{{"curl", "https://x"}, {"curl", "-fsSL", "-o", "out", "https://x"}, {"curl", "-X", "GET", "https://x"}, {"wget", "https://x"}, {"http", "x.org"}, {"http", "x.org", "q==search"}},
		},
	},
	{
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "delete-outside"}, kind: Ask,
		programs: []string{"rm"},
		r: policy.Rule{Name: "delete-outside", Match: policy.Match{CommandRegex: `^rm( \S+)* (-[a-zA-Z]*[rRf][a-zA-Z]*|--recursive|--force)( \S+)* ([/~]\S*|\.\.(/\S*)?)( |$)|^rm( \S+)* ([/~]\S*|\.\.(/\S*)?)( \S+)* (-[a-zA-Z]*[rRf][a-zA-Z]*|--recursive|--force)( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "rm -r or -f of an absolute path, ~ or .. reaches outside the workspace",
			ExamplesMatch:    [][]string{{"rm", "-rf", "/"}, {"rm", "-r", "~/x"}, {"rm", "-rf", "../other"}, {"rm", "-f", "/etc/x"}, {"rm", "/x", "-rf"}, {"rm", "--recursive", ".."}},
			ExamplesNotMatch: [][]string{{"rm", "-rf", "build"}, {"rm", "-rf", "./dist"}, {"rm", "/tmp/file"}, {"rm", "-rf", "a/../b"}},
		},
	},
	{
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "payments-messaging"}, kind: Ask,
		programs: []string{"stripe", "twilio", "aws"},
		r: policy.Rule{Name: "payments-messaging", Match: policy.Match{CommandRegex: `^((stripe|twilio)|aws (.* )?(ses|sesv2|sns publish))( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "payment and messaging services move money or reach people",
			ExamplesMatch:    [][]string{{"stripe", "charges", "create"}, {"twilio", "api:core:messages:create"}, {"aws", "ses", "send-email"}, {"aws", "--region", "eu-west-1", "sesv2", "send-email"}, {"aws", "sns", "publish", "--message", "x"}},
			ExamplesNotMatch: [][]string{{"aws", "s3", "ls"}, {"aws", "sns", "list-topics"}},
		},
	},
}
