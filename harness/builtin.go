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
// its base name (see policy.Match.CommandRegex). A word is \S+: with
// whitespace inside a word escaped, that holds for every word. Where a
// program reads options before the word that decides (git -P push), an
// expression skips them: an option that takes its value in the next word
// skips that word too, listed where the program's options are few (git,
// docker), any word after an option where they are many (podman, gh).
//
// The table is a composite literal of constants, which the compiler lays
// out as data: neither the package's initialisation nor a run builds it
// (built by function calls, it cost every run some hundred allocations).
// Keep it so: a function call in it would move the whole table into a
// package initialiser (`GODEBUG=inittrace=1 moat version` lists harness
// once it has one).
var irreversible = []*rule{
	{
		// git's own options come before the command: -C, -c and the long
		// ones that take a separate value skip that value; any other word
		// starting with - is one option (-p, -P, --bare, --git-dir=x). A
		// value with spaces is one \S+ once CommandWords escapes them.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "git-push"}, kind: Ask,
		programs: []string{"git"},
		needs:    []string{"push"},
		r: policy.Rule{Name: "git-push", Match: policy.Match{CommandRegex: `^git( (-[cC]|--(git-dir|work-tree|namespace|config-env|super-prefix|attr-source|shallow-file)) \S+| -([^cC\s]\S*|[cC]\S+))* push( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "git push publishes commits to a remote",
			ExamplesMatch:    [][]string{{"git", "push"}, {"git", "push", "origin", "main"}, {"/usr/bin/git", "push"}, {"git", "-C", "repo", "push", "-f"}, {"git", "-P", "push"}, {"git", "--no-pager", "push"}, {"git", "--git-dir", ".git", "push"}, {"git", "--git-dir=.git", "push"}, {"git", "--work-tree", "x", "push"}, {"git", "--config-env", "a=B", "push"}, {"git", "-C", "d", "-c", "k=v", "--bare", "push"}},
			ExamplesNotMatch: [][]string{{"git", "status"}, {"git", "log", "push"}, {"git", "pushx"}, {"git", "log", "--grep", "push"}, {"git", "commit", "-m", "push"}, {"git", "-P", "grep", "push"}, {"git", "-c", "push", "log"}},
		},
	},
	{
		// npm takes a command's unique prefix (npm pu is npm publish), gem
		// too (gem pu), and gem -C DIR comes before the command.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "package-publish"}, kind: Ask,
		programs: []string{"npm", "pnpm", "yarn", "bun", "cargo", "gem", "twine", "poetry", "uv", "flit", "hatch", "pdm", "maturin"},
		needs:    []string{"publish", "push", "upload", "pu", "pub", "publ", "publi", "publis", "pus"},
		r: policy.Rule{Name: "package-publish", Match: policy.Match{CommandRegex: `^(npm (.* )?pu(b(l(i(sh?)?)?)?)?|(pnpm|yarn|bun|cargo) (.* )?publish|gem( -C \S+)? pu(sh?)?|twine( -\S+)* upload|(poetry|uv|flit|hatch|pdm)( -\S+( \S+)?)* publish|maturin( -\S+( \S+)?)* (publish|upload))( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "publishing a package makes it public, and a version cannot be published twice",
			ExamplesMatch:    [][]string{{"npm", "publish"}, {"npm", "--tag", "next", "publish"}, {"npm", "pub"}, {"pnpm", "publish", "--access", "public"}, {"yarn", "npm", "publish"}, {"cargo", "publish"}, {"cargo", "--locked", "publish"}, {"gem", "push", "x.gem"}, {"gem", "-C", "d", "pu", "x.gem"}, {"twine", "upload", "dist/*"}, {"twine", "--no-color", "upload", "d"}, {"uv", "publish"}, {"poetry", "-C", "d", "publish"}, {"uv", "--directory", "d", "publish"}, {"pdm", "publish"}},
			ExamplesNotMatch: [][]string{{"npm", "install"}, {"npm", "install", "publish-tools"}, {"npm", "update"}, {"cargo", "build"}, {"gem", "install", "rake"}, {"pip", "install", "twine"}, {"uv", "run", "pytest"}, {"poetry", "add", "requests"}},
		},
	},
	{
		// Python's options before -m: -W and -X take a separate value;
		// -m may be joined to earlier flags and to its module (-Imtwine).
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "python-upload"}, kind: Ask,
		needs: []string{"upload", "publish"},
		r: policy.Rule{Name: "python-upload", Match: policy.Match{CommandRegex: `^(python|pypy)[0-9.]*t?( -[a-zA-Z]*[WX] \S+| -\S+)* -[a-zA-Z]*m ?(twine(\.__main__)?( -\S+)* upload|(poetry|uv|flit|hatch|pdm)(\.__main__)?( -\S+( \S+)?)* publish)( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "publishing a package makes it public, and a version cannot be published twice",
			ExamplesMatch:    [][]string{{"python3", "-m", "twine", "upload", "dist/*"}, {"python", "-m", "twine", "upload"}, {"python3", "-mtwine", "upload", "d"}, {"python3", "-I", "-m", "twine", "upload", "d"}, {"python3.12", "-W", "ignore", "-Im", "twine", "upload"}, {"python3", "-m", "flit", "publish"}},
			ExamplesNotMatch: [][]string{{"python3", "step.py"}, {"python3", "-m", "pytest"}, {"python3", "-m", "pip", "install", "twine"}, {"python3", "upload.py"}},
		},
	},
	{
		// docker's options before the command are few: -c, -H, -l and the
		// long ones listed take a value. podman has many, so any word after
		// an option may be its value.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "image-push"}, kind: Ask,
		programs: []string{"docker", "podman", "docker-compose", "podman-compose"},
		needs:    []string{"push", "--push"},
		r: policy.Rule{Name: "image-push", Match: policy.Match{CommandRegex: `^((docker( (-[a-zA-Z]*[cHl]|--(config|context|host|log-level|tlscacert|tlscert|tlskey)) \S+| -([^cHl\s]\S*|[cHl]\S+))*|podman( -\S+( \S+)?)*) ((image |manifest )?push|compose( -\S+( \S+)?)* push|(buildx( -\S+( \S+)?)* )?(build|bake)( \S+)* --push)|(docker|podman)-compose( -\S+( \S+)?)* push)( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "pushing an image publishes it to a registry",
			ExamplesMatch:    [][]string{{"docker", "push", "repo/app:1"}, {"podman", "image", "push", "x"}, {"docker", "--context", "prod", "push", "r/a"}, {"docker", "-H", "tcp://h", "push", "r/a"}, {"docker", "--config", "d", "push"}, {"docker", "-D", "image", "push", "x"}, {"podman", "--remote", "--url", "u", "push", "x"}, {"docker", "compose", "-f", "c.yml", "push"}, {"docker", "buildx", "build", "-t", "r/a", "--push", "."}},
			ExamplesNotMatch: [][]string{{"docker", "pull", "alpine"}, {"docker", "build", "."}, {"docker", "ps"}, {"docker", "--context", "prod", "ps"}, {"docker", "run", "push"}, {"docker", "build", "-t", "push", "."}},
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
		// gh reads options anywhere, before the command too (gh -R o/r pr
		// merge); gh release new is gh release create.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "github-release"}, kind: Ask,
		programs: []string{"gh"},
		needs:    []string{"create", "new", "merge"},
		r: policy.Rule{Name: "github-release", Match: policy.Match{CommandRegex: `^gh( -\S+( \S+)?)* (release( -\S+( \S+)?)* (create|new)|pr( -\S+( \S+)?)* merge)( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "this publishes a release or merges a pull request on GitHub",
			ExamplesMatch:    [][]string{{"gh", "release", "create", "v1.0"}, {"gh", "pr", "merge", "12"}, {"gh", "-R", "o/r", "pr", "merge", "12"}, {"gh", "release", "--repo", "o/r", "create", "v1"}, {"gh", "release", "new", "v1"}},
			ExamplesNotMatch: [][]string{{"gh", "pr", "view", "12"}, {"gh", "release", "list"}, {"gh", "pr", "create"}, {"gh", "issue", "view", "merge"}},
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
		// curl: a short option that takes a value takes the rest of its
		// word, so -d, -F, -T and -X may end a group of flags that take
		// none (-sd x, -sXDELETE; in -oX the X is -o's value). wget takes
		// a long option's unique prefix (--post-d) and wgetrc commands
		// through -e. An HTTPie method is a word of its own; an item
		// NAME=value, NAME:=json, NAME@file or @file sends data.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "http-write"}, kind: Ask,
		programs: []string{"curl", "wget", "wget2", "http", "https", "xh", "xhs"},
		r: policy.Rule{Name: "http-write", Match: policy.Match{CommandRegex: `^(curl (.* )?(-[^-\sAbcCdDeEFHKmoPQrtTuUwxXyYz]*[dFT]|--data|--form|--up[a-z-]*( |=|$)|--js[a-z]*( |=|$)|(-[^-\sAbcCdDeEFHKmoPQrtTuUwxXyYz]*X ?|--request[ =]?)(?i:POST|PUT|PATCH|DELETE|PURGE|MKCOL|COPY|MOVE|PROPPATCH|LOCK|UNLOCK)( |$))|wget2? (.* )?(--(post|body)-[df]|--meth|(-[a-zA-Z0-9]*e ?|--execute[ =])(?i:(post|body)[_-]?(data|file)|method))|(http|https|xh|xhs) (.* )?((?i:POST|PUT|PATCH|DELETE)( |$)|--raw|([A-Za-z0-9_.\[\]\\][A-Za-z0-9_.\[\]\\-]*)?(=[^=]|=$|:=|@)))`}, Decision: policy.DecisionAsk,
			Reason:           "this sends data to a server, or asks it to change something",
			ExamplesMatch:    [][]string{{"curl", "-d", "a=1", "https://x"}, {"curl", "--data-binary", "@f", "https://x"}, {"curl", "-X", "POST", "https://x"}, {"curl", "-XDELETE", "https://x"}, {"curl", "-sX", "DELETE", "https://x"}, {"curl", "-sXPOST", "https://x"}, {"curl", "--request=DELETE", "https://x"}, {"curl", "-sd", "x", "https://x"}, {"curl", "-sF", "f=@x", "https://x"}, {"curl", "--json", "{}", "https://x"}, {"wget", "--post-data=a=1", "https://x"}, {"wget", "--post-d", "a=1", "https://x"}, {"wget", "-e", "post_data=a", "https://x"}, {"http", "POST", "x.org"}, {"http", "-a", "u:p", "DELETE", "x.org"}, {"http", "x.org", "name=me"}},
			ExamplesNotMatch: [][]string{{"curl", "https://x"}, {"curl", "-s", "-o", "f", "https://x"}, {"curl", "-fsSL", "-o", "out", "https://x"}, {"curl", "-X", "GET", "https://x"}, {"curl", "-sXGET", "https://x"}, {"wget", "https://x"}, {"wget", "-O", "f", "https://x"}, {"http", "x.org"}, {"http", "x.org", "q==search"}, {"http", "--auth=u:p", "x.org"}, {"http", "x.org/?a=b"}},
		},
	},
	{
		// Any path with a .. component may climb out, also a/../b: the
		// kernel resolves .. after a, which may be a symbolic link.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "delete-outside"}, kind: Ask,
		programs: []string{"rm"},
		r: policy.Rule{Name: "delete-outside", Match: policy.Match{CommandRegex: `^rm( \S+)* (-[a-zA-Z]*[rRf][a-zA-Z]*|--[rf][a-z-]*)( \S+)* (["']?[/~]\S*|(\S*[/"'])?\.\.([/"']\S*)?|["']?\$(HOME|\{HOME\})([/"'}]\S*)?)( |$)|^rm( \S+)* (["']?[/~]\S*|(\S*[/"'])?\.\.([/"']\S*)?|["']?\$(HOME|\{HOME\})([/"'}]\S*)?)( \S+)* (-[a-zA-Z]*[rRf][a-zA-Z]*|--[rf][a-z-]*)( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "rm -r or -f of an absolute path, ~, $HOME or a path through .. can reach outside the workspace",
			ExamplesMatch:    [][]string{{"rm", "-rf", "/"}, {"rm", "-r", "~/x"}, {"rm", "-rf", "../other"}, {"rm", "-f", "/etc/x"}, {"rm", "/x", "-rf"}, {"rm", "--recursive", ".."}, {"rm", "-rf", "./../x"}, {"rm", "-rf", "sub/../../x"}, {"rm", "-rf", "a/../b"}, {"rm", "-rf", "x/.."}, {"rm", "-rf", "--", "../x"}, {"rm", "-rf", "$HOME/x"}, {"rm", "-rf", `"$HOME"`}},
			ExamplesNotMatch: [][]string{{"rm", "-rf", "build"}, {"rm", "-rf", "./dist"}, {"rm", "/tmp/file"}, {"rm", "-rf", "a..b"}, {"rm", "-rf", ".../x"}, {"rm", "-rf", "$OUT/x"}},
		},
	},
	{
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "payments-messaging"}, kind: Ask,
		programs: []string{"stripe", "twilio", "aws"},
		r: policy.Rule{Name: "payments-messaging", Match: policy.Match{CommandRegex: `^((stripe|twilio)|aws (.* )?(ses|sesv2|sns( \S+)* publish))( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "payment and messaging services move money or reach people",
			ExamplesMatch:    [][]string{{"stripe", "charges", "create"}, {"twilio", "api:core:messages:create"}, {"aws", "ses", "send-email"}, {"aws", "--region", "eu-west-1", "sesv2", "send-email"}, {"aws", "sns", "publish", "--message", "x"}, {"aws", "sns", "--region", "x", "publish"}},
			ExamplesNotMatch: [][]string{{"aws", "s3", "ls"}, {"aws", "sns", "list-topics"}},
		},
	},
}
