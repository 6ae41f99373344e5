package harness

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
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
		"package-publish": {"publish", "push", "upload", "pu", "pub", "publ", "publi", "publis", "pus"},
		"python-upload":   {"upload", "publish"},
		"image-push":      {"push", "--push"},
		"deploy":          {"apply", "delete", "create", "replace", "patch", "scale", "rollout", "destroy", "install", "upgrade", "uninstall", "rollback"},
		"github-release":  {"create", "new", "merge"},
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

// builtinCases are spellings the built-in set must ask about (rule set)
// or leave alone (rule ""): options before the word that decides, flags
// joined in one word, --opt=value and --opt value, and the ordinary
// commands around them. spaced marks a case with a space inside a word,
// which is one \S+ only once CommandWords escapes it.
var builtinCases = []struct {
	argv   []string
	rule   string
	spaced bool
}{
	// git-push: git's own options before push.
	{[]string{"git", "-P", "push", "origin", "main"}, "git-push", false},
	{[]string{"git", "-p", "push"}, "git-push", false},
	{[]string{"git", "--no-pager", "push"}, "git-push", false},
	{[]string{"git", "--paginate", "push"}, "git-push", false},
	{[]string{"git", "--git-dir", ".git", "push"}, "git-push", false},
	{[]string{"git", "--git-dir=.git", "push"}, "git-push", false},
	{[]string{"git", "--work-tree", "x", "push"}, "git-push", false},
	{[]string{"git", "--work-tree=x", "push"}, "git-push", false},
	{[]string{"git", "--namespace", "n", "push"}, "git-push", false},
	{[]string{"git", "--config-env", "a=B", "push"}, "git-push", false},
	{[]string{"git", "--config-env=a=B", "push"}, "git-push", false},
	{[]string{"git", "--attr-source", "HEAD", "push"}, "git-push", false},
	{[]string{"git", "-C", "d", "-c", "k=v", "--bare", "push"}, "git-push", false},
	{[]string{"git", "--exec-path=/x", "push"}, "git-push", false},
	{[]string{"git", "--no-replace-objects", "--literal-pathspecs", "push", "-f"}, "git-push", false},
	{[]string{"git", "-c", "x.y=a b", "push"}, "git-push", true},
	{[]string{"git", "-C", "my repo", "push"}, "git-push", true},
	{[]string{"git", "status"}, "", false},
	{[]string{"git", "log", "--grep", "push"}, "", false},
	{[]string{"git", "commit", "-m", "push it"}, "", false},
	{[]string{"git", "commit", "-m", "push"}, "", false},
	{[]string{"git", "-P", "grep", "push"}, "", false},
	{[]string{"git", "--no-pager", "log", "push"}, "", false},
	{[]string{"git", "-C", "push", "status"}, "", false},
	{[]string{"git", "-c", "push", "log"}, "", false},
	{[]string{"git", "-c", "user.name=push", "commit"}, "", false},
	{[]string{"git", "-c", "x.y=a push", "log"}, "", true},
	{[]string{"git", "pushx"}, "", false},

	// http-write: curl's joined short flags, --opt=value.
	{[]string{"curl", "-sX", "DELETE", "https://x"}, "http-write", false},
	{[]string{"curl", "-XDELETE", "https://x"}, "http-write", false},
	{[]string{"curl", "-sXDELETE", "https://x"}, "http-write", false},
	{[]string{"curl", "-sXPOST", "https://x"}, "http-write", false},
	{[]string{"curl", "-sSfX", "put", "https://x"}, "http-write", false},
	{[]string{"curl", "--request=DELETE", "https://x"}, "http-write", false},
	{[]string{"curl", "--request", "PATCH", "https://x"}, "http-write", false},
	{[]string{"curl", "https://x", "-X", "POST"}, "http-write", false},
	{[]string{"curl", "-d", "x", "https://x"}, "http-write", false},
	{[]string{"curl", "-dx", "https://x"}, "http-write", false},
	{[]string{"curl", "-sd", "x", "https://x"}, "http-write", false},
	{[]string{"curl", "-sSd@f", "https://x"}, "http-write", false},
	{[]string{"curl", "-#F", "f=@x", "https://x"}, "http-write", false},
	{[]string{"curl", "-sT", "f", "ftp://x"}, "http-write", false},
	{[]string{"curl", "--data=x", "https://x"}, "http-write", false},
	{[]string{"curl", "--data-urlencode", "a=b", "https://x"}, "http-write", false},
	{[]string{"curl", "--form-string", "a=b", "https://x"}, "http-write", false},
	{[]string{"curl", "--upload-file=f", "https://x"}, "http-write", false},
	{[]string{"curl", "--json={}", "https://x"}, "http-write", false},
	{[]string{"curl", "-H", "Content-Type: application/json", "-d", "{\"a\": 1}", "https://x"}, "http-write", false},
	{[]string{"wget", "--post-file", "f", "https://x"}, "http-write", false},
	{[]string{"wget", "--method=DELETE", "https://x"}, "http-write", false},
	{[]string{"wget", "-qe", "body_data=x", "https://x"}, "http-write", false},
	{[]string{"wget2", "--post-data", "a", "https://x"}, "http-write", false},
	{[]string{"http", "--session", "s", "PUT", "x.org"}, "http-write", false},
	{[]string{"xh", "delete", "x.org"}, "http-write", false},
	{[]string{"http", "x.org", "a:=1"}, "http-write", false},
	{[]string{"http", "-f", "x.org", "file@f.txt"}, "http-write", false},
	{[]string{"http", "x.org", "a[b]=1"}, "http-write", false},
	{[]string{"http", "x.org", "@body.json"}, "http-write", false},
	{[]string{"http", "x.org", "my key=1"}, "http-write", true},
	{[]string{"curl", "https://x"}, "", false},
	{[]string{"curl", "-s", "-o", "f", "https://x"}, "", false},
	{[]string{"curl", "-fsSL", "https://x", "-o", "out"}, "", false},
	{[]string{"curl", "-sSLO", "https://x/d.tgz"}, "", false},
	{[]string{"curl", "-o", "d", "https://x"}, "", false},
	{[]string{"curl", "-od", "https://x"}, "", false},
	{[]string{"curl", "-sXGET", "https://x"}, "", false},
	{[]string{"curl", "-X", "HEAD", "https://x"}, "", false},
	{[]string{"curl", "-H", "X-Mode: -d", "https://x"}, "", true},
	{[]string{"curl", "--digest", "-u", "a:b", "https://x"}, "", false},
	{[]string{"wget", "-q", "-O", "-", "https://x"}, "", false},
	{[]string{"http", "--auth=u:p", "x.org"}, "", false},
	{[]string{"http", "x.org/a?b=c"}, "", false},
	{[]string{"http", "x.org", "Accept:text/plain", "q==1"}, "", false},

	// image-push: the client's options before the command.
	{[]string{"docker", "--context", "prod", "push", "r/a"}, "image-push", false},
	{[]string{"docker", "--context=prod", "push", "r/a"}, "image-push", false},
	{[]string{"docker", "-c", "prod", "push", "r/a"}, "image-push", false},
	{[]string{"docker", "-H", "tcp://h", "push", "r/a"}, "image-push", false},
	{[]string{"docker", "-Htcp://h", "push", "r/a"}, "image-push", false},
	{[]string{"docker", "--config", "d", "push"}, "image-push", false},
	{[]string{"docker", "-D", "--log-level", "debug", "--tls", "image", "push", "x"}, "image-push", false},
	{[]string{"docker", "manifest", "push", "x"}, "image-push", false},
	{[]string{"docker", "compose", "push"}, "image-push", false},
	{[]string{"docker-compose", "-f", "c.yml", "push"}, "image-push", false},
	{[]string{"docker", "build", "--push", "-t", "x", "."}, "image-push", false},
	{[]string{"docker", "buildx", "--builder", "b", "build", "--push", "."}, "image-push", false},
	{[]string{"podman", "--connection", "c", "push", "x"}, "image-push", false},
	{[]string{"podman", "--remote", "push", "x"}, "image-push", false},
	{[]string{"podman", "--root=/r", "image", "push", "x"}, "image-push", false},
	{[]string{"docker", "--config", "my dir", "push", "x"}, "image-push", true},
	{[]string{"docker", "ps"}, "", false},
	{[]string{"docker", "--context", "prod", "ps"}, "", false},
	{[]string{"docker", "run", "--rm", "push"}, "", false},
	{[]string{"docker", "-H", "push", "ps"}, "", false},
	{[]string{"docker", "build", "-t", "push", "."}, "", false},
	{[]string{"podman", "--root", "/r", "run", "push"}, "", false},

	// delete-outside: a path that climbs out in any way.
	{[]string{"rm", "-rf", "./../x"}, "delete-outside", false},
	{[]string{"rm", "-rf", "sub/../../x"}, "delete-outside", false},
	{[]string{"rm", "-rf", "../x"}, "delete-outside", false},
	{[]string{"rm", "-rf", "sub/.."}, "delete-outside", false},
	{[]string{"rm", "-fr", "a", "./.."}, "delete-outside", false},
	{[]string{"rm", "-R", "--", "../x"}, "delete-outside", false},
	{[]string{"rm", "--force", "x/../../y"}, "delete-outside", false},
	{[]string{"rm", "--rec", "../x"}, "delete-outside", false},
	{[]string{"rm", "./../x", "-r"}, "delete-outside", false},
	{[]string{"rm", "-rf", "~"}, "delete-outside", false},
	{[]string{"rm", "-rf", "/tmp/x"}, "delete-outside", false},
	{[]string{"sh", "-c", "rm -rf $HOME/.cache"}, "delete-outside", false},
	{[]string{"sh", "-c", `rm -rf "$HOME"`}, "delete-outside", false},
	{[]string{"sh", "-c", `rm -rf "$D"/..`}, "delete-outside", false},
	{[]string{"rm", "-rf", "my dir/../../x"}, "delete-outside", true},
	{[]string{"rm", "-rf", "build"}, "", false},
	{[]string{"rm", "-rf", "./dist", "node_modules/.cache"}, "", false},
	{[]string{"rm", "-rf", "..foo", "foo..", "a..b/c", ".../x"}, "", false},
	{[]string{"rm", "../x"}, "", false}, // neither -r nor -f: one file, as rm /tmp/file
	{[]string{"rm", "-rf", "a ../x"}, "", true},
	{[]string{"sh", "-c", `rm -rf "$OUT/x"`}, "", false},

	// package-publish and python-upload: options before the command,
	// python's joined -m.
	{[]string{"python3", "-mtwine", "upload", "d"}, "python-upload", false},
	{[]string{"python3", "-I", "-m", "twine", "upload", "d"}, "python-upload", false},
	{[]string{"python", "-m", "twine", "upload"}, "python-upload", false},
	{[]string{"/usr/bin/python3.12", "-Im", "twine", "upload", "d"}, "python-upload", false},
	{[]string{"python3", "-W", "ignore", "-X", "utf8", "-m", "twine", "--no-color", "upload"}, "python-upload", false},
	{[]string{"python3", "-m", "twine.__main__", "upload"}, "python-upload", false},
	{[]string{"pypy3", "-m", "twine", "upload"}, "python-upload", false},
	{[]string{"python3", "-m", "poetry", "publish"}, "python-upload", false},
	{[]string{"python3", "-m", "pytest"}, "", false},
	{[]string{"python3", "-m", "pip", "install", "twine"}, "", false},
	{[]string{"python3", "upload.py", "publish"}, "", false},
	{[]string{"python3", "-m", "twine", "check", "dist/*"}, "", false},
	{[]string{"npm", "--tag", "x", "publish"}, "package-publish", false},
	{[]string{"npm", "--registry=https://r", "publish"}, "package-publish", false},
	{[]string{"npm", "publ"}, "package-publish", false},
	{[]string{"pnpm", "-r", "--filter", "a", "publish"}, "package-publish", false},
	{[]string{"yarn", "--cwd", "p", "publish"}, "package-publish", false},
	{[]string{"cargo", "--locked", "publish"}, "package-publish", false},
	{[]string{"cargo", "+nightly", "publish", "-p", "x"}, "package-publish", false},
	{[]string{"gem", "push", "x.gem"}, "package-publish", false},
	{[]string{"gem", "pu", "x.gem"}, "package-publish", false},
	{[]string{"gem", "-C", "d", "push", "x.gem"}, "package-publish", false},
	{[]string{"twine", "--no-color", "upload", "d"}, "package-publish", false},
	{[]string{"poetry", "publish", "--build"}, "package-publish", false},
	{[]string{"poetry", "--no-interaction", "-C", "d", "publish"}, "package-publish", false},
	{[]string{"uv", "--directory", "d", "publish"}, "package-publish", false},
	{[]string{"uv", "-q", "publish"}, "package-publish", false},
	{[]string{"hatch", "-e", "x", "publish"}, "package-publish", false},
	{[]string{"flit", "publish"}, "package-publish", false},
	{[]string{"pdm", "publish"}, "package-publish", false},
	{[]string{"maturin", "upload", "d"}, "package-publish", false},
	{[]string{"npm", "install"}, "", false},
	{[]string{"npm", "run", "build"}, "", false},
	{[]string{"npm", "install", "publish-tools"}, "", false},
	{[]string{"cargo", "build", "--release"}, "", false},
	{[]string{"gem", "install", "rake"}, "", false},
	{[]string{"uv", "pip", "install", "x"}, "", false},
	{[]string{"uv", "run", "pytest"}, "", false},
	{[]string{"poetry", "add", "requests"}, "", false},

	// github-release, payments-messaging: options before the command.
	{[]string{"gh", "-R", "o/r", "pr", "merge", "12"}, "github-release", false},
	{[]string{"gh", "pr", "--repo=o/r", "merge", "12"}, "github-release", false},
	{[]string{"gh", "release", "new", "v1"}, "github-release", false},
	{[]string{"gh", "pr", "view", "12"}, "", false},
	{[]string{"gh", "pr", "list", "--search", "merge"}, "", false},
	{[]string{"aws", "sns", "--region", "x", "publish", "--message", "m"}, "payments-messaging", false},
	{[]string{"aws", "sns", "list-topics"}, "", false},
}

// escapesWords reports whether CommandWords escapes a space inside a
// word (\x20), so that one \S+ is one word.
func escapesWords() bool {
	return !strings.Contains(policy.CommandWords([]string{"x", "a b"}), " b")
}

// escapedWords is CommandWords with whitespace and control characters
// inside a word escaped as \xNN, to check the expressions under that
// scheme whether or not CommandWords has it yet.
func escapedWords(argv []string) string {
	ws := make([]string, len(argv))
	for i, a := range argv {
		if i == 0 {
			a = a[strings.LastIndexByte(a, '/')+1:]
		}
		var b strings.Builder
		for _, c := range []byte(a) {
			if c <= ' ' || c == 0x7f {
				fmt.Fprintf(&b, `\x%02x`, c)
			} else {
				b.WriteByte(c)
			}
		}
		ws[i] = b.String()
	}
	return strings.Join(ws, " ")
}

// TestBuiltinCases: each case decides as it says through Decide, and the
// rule's expression decides the same on the words escaped.
func TestBuiltinCases(t *testing.T) {
	rs := New(policy.Default())
	res := map[string]*regexp.Regexp{}
	for _, r := range Builtin(policy.BuiltinIrreversible) {
		if r.Match.CommandRegex != "" {
			res[r.Name] = regexp.MustCompile(r.Match.CommandRegex)
		}
	}
	escapes := escapesWords()
	for _, tt := range builtinCases {
		// The expressions on escaped words: the simple commands are the
		// argv itself, but for sh -c (whose words are not escaped here).
		if tt.argv[0] != "sh" {
			words := escapedWords(tt.argv)
			for name, re := range res {
				if m := re.MatchString(words); m != (name == tt.rule) {
					t.Errorf("%q escaped (%s): %s matched %v", tt.argv, words, name, m)
				}
			}
		}
		if tt.spaced && !escapes {
			continue
		}
		d := rs.Decide(Action{Argv: tt.argv})
		got := ""
		if d.Rule != nil {
			got = d.Rule.Name
		}
		if got != tt.rule || (tt.rule == "") != (d.Verdict == Allow) {
			t.Errorf("Decide(%q) = %s %q, want rule %q", tt.argv, d.Verdict, got, tt.rule)
		}
	}
}
