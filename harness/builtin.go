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
		// git lfs push, git svn dcommit and git p4 submit send commits
		// (or their files) to another kind of remote; git send-email
		// mails them. git send-pack and git http-push are the plumbing
		// under git push: they publish as it does. git-lfs, git-svn,
		// git-p4, git-send-email and git-send-pack started as programs are
		// decided as git lfs, git svn, ... (decideOne).
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "git-push"}, kind: Ask,
		programs: []string{"git"},
		needs:    []string{"push", "dcommit", "submit", "send-email", "send-pack", "http-push"},
		r: policy.Rule{Name: "git-push", Match: policy.Match{CommandRegex: `^git( (-[cC]|--(git-dir|work-tree|namespace|config-env|super-prefix|attr-source|shallow-file)) \S+| -([^cC\s]\S*|[cC]\S+))* (push|send-pack|http-push|lfs push|svn dcommit|p4 submit|send-email)( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "git push publishes commits to a remote (git send-email mails them)",
			ExamplesMatch:    [][]string{{"git", "push"}, {"git", "push", "origin", "main"}, {"/usr/bin/git", "push"}, {"git", "-C", "repo", "push", "-f"}, {"git", "-P", "push"}, {"git", "--no-pager", "push"}, {"git", "--git-dir", ".git", "push"}, {"git", "--git-dir=.git", "push"}, {"git", "--work-tree", "x", "push"}, {"git", "--config-env", "a=B", "push"}, {"git", "-C", "d", "-c", "k=v", "--bare", "push"}, {"git", "lfs", "push", "origin", "main"}, {"git", "svn", "dcommit"}, {"git", "p4", "submit"}, {"git", "send-email", "HEAD^"}, {"git", "send-pack", "../bare.git", "HEAD:main"}, {"git", "http-push", "https://example.com/r.git", "main"}},
			ExamplesNotMatch: [][]string{{"git", "status"}, {"git", "log", "push"}, {"git", "pushx"}, {"git", "log", "--grep", "push"}, {"git", "commit", "-m", "push"}, {"git", "-P", "grep", "push"}, {"git", "-c", "push", "log"}, {"git", "lfs", "pull"}, {"git", "svn", "rebase"}, {"git", "format-patch", "-1"}},
		},
	},
	{
		// An alias is git's own config: defined on the command line (-c
		// alias.p=push, --config-env alias.p=VAR) or in a file included
		// from it, its body can be anything, git push included, so the
		// line asks whether or not it uses it. (An alias from a config
		// file or GIT_CONFIG_* is not on the line; git runs an alias of a
		// built-in command as a child `git push ...`, and the check of
		// each exec decides that. Past git's options -c is a command's
		// own: git log -c.)
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "git-alias"}, kind: Ask,
		programs: []string{"git"},
		needs:    []string{"-c", "--config-env", "--config-env="},
		r: policy.Rule{Name: "git-alias", Match: policy.Match{CommandRegex: `^git( (-[cC]|--(git-dir|work-tree|namespace|config-env|super-prefix|attr-source|shallow-file)) \S+| -([^cC\s]\S*|[cC]\S+))* (-c |--config-env[ =])(?i:alias\.|include\.path=|includeif\.\S*\.path=|help\.autocorrect=)`}, Decision: policy.DecisionAsk,
			Reason:           "a git alias, config include or autocorrection given on the command line can run any git command, git push included",
			ExamplesMatch:    [][]string{{"git", "-c", "alias.p=push", "p"}, {"git", "-c", "alias.p=!git push", "p"}, {"git", "--config-env=alias.p=CMD", "p"}, {"git", "--config-env", "alias.p=CMD", "p"}, {"git", "-C", "d", "-c", "Alias.P=push", "p"}, {"git", "-c", "include.path=/tmp/x", "p"}, {"git", "-c", "help.autocorrect=immediate", "psuh"}},
			ExamplesNotMatch: [][]string{{"git", "-c", "user.name=alias", "commit"}, {"git", "log", "-c", "alias.x"}, {"git", "-C", "alias.d", "status"}, {"git", "config", "alias.p", "push"}, {"git", "-c", "aliases.p=x", "status"}},
		},
	},
	{
		// npm takes a command's unique prefix (npm pu is npm publish), gem
		// too (gem pu), and gem -C DIR comes before the command.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "package-publish"}, kind: Ask,
		programs: []string{"npm", "pnpm", "yarn", "bun", "deno", "jsr", "lerna", "changeset", "vsce", "ovsx", "cargo", "gem", "twine", "poetry", "uv", "flit", "hatch", "pdm", "maturin", "helm", "dotnet", "nuget", "dart", "flutter", "mix", "pod", "anaconda"},
		needs:    []string{"publish", "push", "upload", "pu", "pub", "publ", "publi", "publis", "pus", "cm-push", "hex.publish"},
		r: policy.Rule{Name: "package-publish", Match: policy.Match{CommandRegex: `^(npm (.* )?pu(b(l(i(sh?)?)?)?)?|(pnpm|yarn|bun|deno|jsr|lerna|changeset|vsce|ovsx|cargo) (.* )?publish|gem( -C \S+)? pu(sh?)?|twine( -\S+)* upload|(poetry|uv|flit|hatch|pdm)( -\S+( \S+)?)* publish|maturin( -\S+( \S+)?)* (publish|upload)|helm( -\S+( \S+)?)* (cm-)?push|(dotnet( -\S+)* nuget|nuget)( -\S+)* push|(dart|flutter)( -\S+)* pub( -\S+)* publish|mix( -\S+)* hex\.publish|pod( -\S+)* trunk( -\S+)* push|anaconda( -\S+( \S+)?)* upload)( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "publishing a package makes it public, and a version cannot be published twice",
			ExamplesMatch:    [][]string{{"npm", "publish"}, {"npm", "--tag", "next", "publish"}, {"npm", "pub"}, {"pnpm", "publish", "--access", "public"}, {"yarn", "npm", "publish"}, {"cargo", "publish"}, {"cargo", "--locked", "publish"}, {"gem", "push", "x.gem"}, {"gem", "-C", "d", "pu", "x.gem"}, {"twine", "upload", "dist/*"}, {"twine", "--no-color", "upload", "d"}, {"uv", "publish"}, {"poetry", "-C", "d", "publish"}, {"uv", "--directory", "d", "publish"}, {"pdm", "publish"}, {"helm", "push", "c.tgz", "oci://r"}, {"dotnet", "nuget", "push", "x.nupkg"}, {"deno", "publish"}, {"vsce", "publish"}, {"dart", "pub", "publish"}, {"mix", "hex.publish"}, {"pod", "trunk", "push"}},
			ExamplesNotMatch: [][]string{{"npm", "install"}, {"npm", "install", "publish-tools"}, {"npm", "update"}, {"cargo", "build"}, {"gem", "install", "rake"}, {"pip", "install", "twine"}, {"uv", "run", "pytest"}, {"poetry", "add", "requests"}, {"helm", "pull", "oci://r/c"}, {"dotnet", "nuget", "list", "source"}, {"dart", "pub", "get"}, {"mix", "hex.build"}},
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
		// Maven runs phases and plugin goals named anywhere among its
		// words: deploy (and any goal ending in :deploy, :deploy-file),
		// site-deploy, the release plugin's prepare (which pushes its
		// tag), perform and stage, jib:build (which pushes an image).
		// Gradle's publishing tasks are publish and publishXxx, in any
		// project (:lib:publish), but for those ending in ToMavenLocal
		// (the last alternatives: a name that does not end in Local);
		// jib pushes
		// an image, closeAndRelease... releases a staging repository.
		// An option's value that is such a word asks too (mvn -pl deploy,
		// gradle -x publish); Gradle's abbreviated task names (pTMC) are
		// not read.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "jvm-publish"}, kind: Ask,
		programs: []string{"mvn", "mvnw", "mvnd", "gradle", "gradlew"},
		r: policy.Rule{Name: "jvm-publish", Match: policy.Match{CommandRegex: `^((mvn|mvnw|mvnd)( \S+)* (([^-\s]\S*:)?(sign-and-)?deploy(-file)?|site-deploy|release:(prepare|perform|stage)|jib:build)|(gradle|gradlew)( \S+)* (:?[^-\s:][^\s:]*:)*(publish([A-Z]\S*([^l\s]|[^a\s]l|[^c\s]al|[^o\s]cal|[^L\s]ocal))?|jib|closeAndRelease\S*))( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "publishing an artifact makes it public, and a release version cannot be published twice",
			ExamplesMatch:    [][]string{{"mvn", "deploy"}, {"mvn", "-DskipTests", "clean", "deploy"}, {"mvnw", "release:perform"}, {"mvn", "deploy:deploy-file", "-Dfile=x.jar"}, {"gradle", "publish"}, {"gradlew", "publishToMavenCentral"}, {"gradle", ":lib:publish"}, {"gradle", "publishAllPublicationsToSonatypeRepository"}, {"gradle", "jib"}},
			ExamplesNotMatch: [][]string{{"mvn", "install"}, {"mvn", "clean", "verify"}, {"mvn", "-Dmaven.deploy.skip", "install"}, {"gradle", "build"}, {"gradle", "publishToMavenLocal"}, {"gradle", ":lib:publishMavenPublicationToMavenLocal"}, {"gradle", "jibDockerBuild"}},
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
		// Cloud CLIs: aws operations that delete, stop, put or update
		// (an operation right after its service, options between), S3
		// removals and moves, a copy or sync to s3:// (its destination:
		// an s3:// word after one that is no option, or after -, which
		// uploads stdin); gcloud and gsutil
		// alike; the deploy and destroy commands of fly, vercel, netlify,
		// wrangler, firebase, pulumi, cdk and serverless. Not a bare
		// vercel (a preview deployment).
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "cloud"}, kind: Ask,
		programs: []string{"aws", "gcloud", "gsutil", "fly", "flyctl", "vercel", "netlify", "wrangler", "firebase", "pulumi", "cdk", "serverless", "sls"},
		r: policy.Rule{Name: "cloud", Match: policy.Match{CommandRegex: `^(aws( -\S+( \S+)?)* (s3( -\S+( \S+)?)* (rm|rb|mv)|s3( \S+)* (cp|sync)( \S+)* ([^-\s]\S*|-) s3://\S*|[a-z0-9][a-z0-9-]*( -\S+( \S+)?)* ((delete|terminate|deregister|remove|purge|stop|reboot|put|update|modify|execute)-\S+|deploy))|gcloud (.* )?(deploy|delete|builds submit|storage (rm|mv)|storage (cp|rsync)( \S+)* ([^-\s]\S*|-) gs://\S*)|gsutil( -\S+( \S+)?)* (rm|rb|mv|(cp|rsync)( \S+)* ([^-\s]\S*|-) gs://\S*)|(fly|flyctl) (.* )?(deploy|destroy)|vercel (.* )?(--prod|--production|deploy|remove|rm|promote|rollback|redeploy)|(netlify|wrangler|firebase|cdk|serverless|sls) (.* )?(\S+:)?deploy|wrangler (.* )?(publish|delete)|(cdk|serverless|sls) (.* )?(destroy|remove)|pulumi (.* )?(up|update|destroy))( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "this changes or deletes what runs or is stored in a cloud account",
			ExamplesMatch:    [][]string{{"aws", "s3", "rm", "s3://b/x"}, {"aws", "s3", "cp", "f", "s3://b/f"}, {"aws", "s3", "cp", "-", "s3://b/k"}, {"aws", "s3", "sync", ".", "s3://b", "--delete"}, {"aws", "ec2", "terminate-instances", "--instance-ids", "i-1"}, {"aws", "cloudformation", "deploy", "--stack-name", "s"}, {"gcloud", "run", "deploy", "svc"}, {"gsutil", "-m", "cp", "-r", "d", "gs://b"}, {"fly", "deploy"}, {"vercel", "--prod"}, {"wrangler", "deploy"}, {"firebase", "deploy"}, {"pulumi", "up"}, {"cdk", "destroy"}},
			ExamplesNotMatch: [][]string{{"aws", "s3", "ls"}, {"aws", "s3", "cp", "s3://b/f", "."}, {"aws", "s3", "cp", "s3://b/f", "-"}, {"aws", "s3", "cp", "--recursive", "s3://b", "d"}, {"aws", "ec2", "describe-instances"}, {"aws", "s3api", "list-objects", "--prefix", "delete-me"}, {"gcloud", "run", "services", "list"}, {"gsutil", "cp", "gs://b/f", "."}, {"fly", "status"}, {"vercel", "dev"}, {"wrangler", "dev"}, {"pulumi", "preview"}, {"cdk", "synth"}},
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
		// What gh posts to other people (a pull request, an issue, a
		// comment or review, a gist), deletes, or sets off (a workflow
		// run, a re-run), and the settings it changes that cannot be
		// read back (secrets) or that publish (a repository's
		// visibility, through repo edit; a new repository, which repo
		// create may make public and push to). Reading stays allowed.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "github-write"}, kind: Ask,
		programs: []string{"gh"},
		needs:    []string{"create", "new", "comment", "review", "delete", "transfer", "archive", "rename", "edit", "upload", "delete-asset", "run", "rerun", "set", "remove"},
		r: policy.Rule{Name: "github-write", Match: policy.Match{CommandRegex: `^gh( -\S+( \S+)?)* (pr( -\S+( \S+)?)* (create|new|comment|review)|issue( -\S+( \S+)?)* (create|new|comment|delete|transfer)|repo( -\S+( \S+)?)* (create|new|delete|archive|rename|edit)|release( -\S+( \S+)?)* (upload|edit|delete|delete-asset)|workflow( -\S+( \S+)?)* run|run( -\S+( \S+)?)* rerun|(secret|variable)( -\S+( \S+)?)* (set|delete|remove)|gist( -\S+( \S+)?)* (create|new|delete))( |$)`}, Decision: policy.DecisionAsk,
			Reason:           "this posts to GitHub for others to see, deletes there, starts a workflow or changes a repository's settings",
			ExamplesMatch:    [][]string{{"gh", "pr", "create", "--fill"}, {"gh", "pr", "comment", "1", "-b", "x"}, {"gh", "issue", "create"}, {"gh", "repo", "delete", "o/r", "--yes"}, {"gh", "repo", "create", "o/r", "--public", "--push", "--source", "."}, {"gh", "-R", "o/r", "workflow", "run", "deploy.yml"}, {"gh", "release", "upload", "v1", "x.tgz"}, {"gh", "secret", "set", "TOKEN"}, {"gh", "gist", "create", "f"}},
			ExamplesNotMatch: [][]string{{"gh", "pr", "view", "1"}, {"gh", "pr", "checks"}, {"gh", "issue", "list"}, {"gh", "repo", "view"}, {"gh", "workflow", "list"}, {"gh", "run", "view", "1"}, {"gh", "secret", "list"}, {"gh", "repo", "clone", "o/r"}},
		},
	},
	{
		// gh api sends GET, but POST once it has a field (-f, -F,
		// --field, --raw-field) or a body (--input), unless a method is
		// given: an explicit POST/PUT/PATCH/DELETE asks; a field asks
		// when no -X/--method comes before it (the words before it are
		// neither a method option nor graphql). GraphQL is POST for
		// reads too: graphql asks for a mutation, or a query it cannot
		// read (from a file, -F query=@f, or --input). A method is -X
		// METHOD, -XMETHOD, -X=METHOD (pflag), --method METHOD or
		// --method=METHOD.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "github-api"}, kind: Ask,
		programs: []string{"gh"},
		needs:    []string{"api"},
		r: policy.Rule{Name: "github-api", Match: policy.Match{CommandRegex: `^gh( -\S+( \S+)?)* api(( \S+)* (-i?X[ =]?|--method[ =])(?i:POST|PUT|PATCH|DELETE)( |$)|( ([^-\sg]\S*|g([^r\s]\S*)?|gr([^a\s]\S*)?|gra([^p\s]\S*)?|grap([^h\s]\S*)?|graph([^q\s]\S*)?|graphq([^l\s]\S*)?|graphql\S+|-|-[^-X\s]\S*|--([^m\s]\S*)?|--m[^e\s]\S*))* (-i?[fF]\S*|--(raw-)?field(=\S*)?|--input(=\S*)?)( |$)|( \S+)* graphql( \S+)* (\S*mutation|--input|\S*=@))`}, Decision: policy.DecisionAsk,
			Reason:           "this asks GitHub's API to change something",
			ExamplesMatch:    [][]string{{"gh", "api", "-X", "POST", "repos/o/r/issues"}, {"gh", "api", "--method", "DELETE", "repos/o/r"}, {"gh", "api", "-XPATCH", "repos/o/r"}, {"gh", "api", "-X=POST", "repos/o/r/issues", "-f", "title=x"}, {"gh", "api", "repos/o/r/issues", "-f", "title=x"}, {"gh", "api", "repos/o/r/labels", "--input", "l.json"}, {"gh", "api", "graphql", "-f", "query=mutation{x}"}},
			ExamplesNotMatch: [][]string{{"gh", "api", "repos/o/r"}, {"gh", "api", "-X", "GET", "search/issues", "-f", "q=x"}, {"gh", "api", "-X=GET", "search/issues", "-f", "q=x"}, {"gh", "api", "graphql", "-f", "query={viewer{login}}"}, {"gh", "api", "--paginate", "repos/o/r/pulls"}},
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
		// through -e; a file of options (curl -K, wget --config) is
		// not read, so it is asked about as what it may send. An
		// HTTPie method is a word of its own; an item
		// NAME=value, NAME:=json, NAME@file or @file sends data.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "http-write"}, kind: Ask,
		programs: []string{"curl", "wget", "wget2", "http", "https", "xh", "xhs"},
		r: policy.Rule{Name: "http-write", Match: policy.Match{CommandRegex: `^(curl (.* )?(-[^-\sAbcCdDeEFHKmoPQrtTuUwxXyYz]*[dFTK]|--data|--conf[a-z]*( |=|$)|--form|--up[a-z-]*( |=|$)|--js[a-z]*( |=|$)|(-[^-\sAbcCdDeEFHKmoPQrtTuUwxXyYz]*X ?|--request[ =]?)(?i:POST|PUT|PATCH|DELETE|PURGE|MKCOL|COPY|MOVE|PROPPATCH|LOCK|UNLOCK)( |$))|wget2? (.* )?(--(post|body)-[df]|--me(t|th[a-z]*)?( |=|$)|--conf[a-z]*( |=|$)|(-[a-zA-Z0-9]*e ?|--exe[a-z]*[ =])(\\x(20|09))*(?i:[-_]*(p[-_]*o[-_]*s[-_]*t|b[-_]*o[-_]*d[-_]*y)[-_]*(d[-_]*a[-_]*t[-_]*a|f[-_]*i[-_]*l[-_]*e)|[-_]*m[-_]*e[-_]*t[-_]*h[-_]*o[-_]*d))|(http|https|xh|xhs) (.* )?((?i:POST|PUT|PATCH|DELETE)( |$)|--raw|([A-Za-z0-9_.\[\]\\][A-Za-z0-9_.\[\]\\-]*)?(=[^=]|=$|:=|@)))`}, Decision: policy.DecisionAsk,
			Reason:           "this sends data to a server, or asks it to change something",
			ExamplesMatch:    [][]string{{"curl", "-d", "a=1", "https://x"}, {"curl", "--data-binary", "@f", "https://x"}, {"curl", "-X", "POST", "https://x"}, {"curl", "-XDELETE", "https://x"}, {"curl", "-sX", "DELETE", "https://x"}, {"curl", "-sXPOST", "https://x"}, {"curl", "--request=DELETE", "https://x"}, {"curl", "-sd", "x", "https://x"}, {"curl", "-sF", "f=@x", "https://x"}, {"curl", "--json", "{}", "https://x"}, {"wget", "--post-data=a=1", "https://x"}, {"wget", "--post-d", "a=1", "https://x"}, {"wget", "--me=DELETE", "https://x"}, {"wget", "--met", "POST", "https://x"}, {"wget", "--method=PUT", "https://x"}, {"wget", "-e", "post_data=a", "https://x"}, {"curl", "-K", "cfg", "https://x"}, {"curl", "-sK", "cfg", "https://x"}, {"curl", "--config=cfg", "https://x"}, {"wget", "--config", "rc", "https://x"}, {"curl", "--conf", "cfg", "https://x"}, {"wget", "--conf=rc", "https://x"}, {"wget", "--exe", "post_data=a", "https://x"}, {"wget", "-e", " post_data=a", "https://x"}, {"wget", "-e", "me_thod=POST", "https://x"}, {"wget", "-e", "Post-_Data=b", "https://x"}, {"wget", "--execute=me-thod=DELETE", "https://x"}, {"http", "POST", "x.org"}, {"http", "-a", "u:p", "DELETE", "x.org"}, {"http", "x.org", "name=me"}},
			ExamplesNotMatch: [][]string{{"curl", "https://x"}, {"curl", "-s", "-o", "f", "https://x"}, {"curl", "-fsSL", "-o", "out", "https://x"}, {"curl", "-X", "GET", "https://x"}, {"curl", "-sXGET", "https://x"}, {"wget", "https://x"}, {"wget", "-O", "f", "https://x"}, {"wget", "--mirror", "https://x"}, {"http", "x.org"}, {"http", "x.org", "q==search"}, {"http", "--auth=u:p", "x.org"}, {"http", "x.org/?a=b"}},
		},
	},
	{
		// Any path with a .. component may climb out, also a/../b: the
		// kernel resolves .. after a, which may be a symbolic link. An
		// absolute path into the workspace is not asked about (confined,
		// see scratch): a relative one may already delete there.
		ref: RuleRef{Set: policy.BuiltinIrreversible, Name: "delete-outside"}, kind: Ask,
		programs: []string{"rm"}, confined: true,
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
