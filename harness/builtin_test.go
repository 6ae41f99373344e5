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
		"git-push":        {"push", "dcommit", "submit", "send-email", "send-pack", "http-push"},
		"git-alias":       {"-c", "--config-env", "--config-env="},
		"package-publish": {"publish", "push", "upload", "pu", "pub", "publ", "publi", "publis", "pus", "cm-push", "hex.publish"},
		"python-upload":   {"upload", "publish"},
		"image-push":      {"push", "--push"},
		"deploy":          {"apply", "delete", "create", "replace", "patch", "scale", "rollout", "destroy", "install", "upgrade", "uninstall", "rollback"},
		"github-release":  {"create", "new", "merge"},
		"github-api":      {"api"},
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

	// git-push: the other ways git sends commits away, also started as
	// git's own programs (git-lfs push).
	{[]string{"git", "lfs", "push", "origin", "main"}, "git-push", false},
	{[]string{"git-lfs", "push", "--all", "origin"}, "git-push", false},
	{[]string{"git", "-C", "d", "svn", "dcommit"}, "git-push", false},
	{[]string{"git", "p4", "submit"}, "git-push", false},
	{[]string{"git", "send-email", "--to", "l@x", "HEAD^"}, "git-push", false},
	{[]string{"git-send-email", "0001.patch"}, "git-push", false},
	{[]string{"git", "lfs", "pull"}, "", false},
	{[]string{"git", "lfs", "ls-files"}, "", false},
	{[]string{"git", "svn", "fetch"}, "", false},
	{[]string{"git", "format-patch", "-1"}, "", false},
	{[]string{"git", "commit", "-m", "send-email"}, "", false},

	// git-alias: an alias (or an include) given on the command line.
	{[]string{"git", "-c", "alias.p=push", "p"}, "git-alias", false},
	{[]string{"git", "-c", "alias.p=!git push", "p"}, "git-alias", true},
	{[]string{"git", "-c", "alias.p=!sh -c 'git push'", "p", "x"}, "git-alias", true},
	{[]string{"git", "--config-env=alias.p=X", "p"}, "git-alias", false},
	{[]string{"git", "--config-env", "alias.p=X", "p"}, "git-alias", false},
	{[]string{"git", "-C", "d", "-c", "user.name=x", "-c", "ALIAS.p=push", "p"}, "git-alias", false},
	{[]string{"git", "-P", "-c", "alias.st=status", "st"}, "git-alias", false},
	{[]string{"git", "-c", "include.path=/tmp/a.cfg", "p"}, "git-alias", false},
	{[]string{"git", "-c", "includeIf.gitdir:/w/.path=/tmp/a.cfg", "p"}, "git-alias", false},
	{[]string{"sh", "-c", "git -c alias.p=push p origin"}, "git-alias", false},
	{[]string{"git", "-c", "user.name=alias.p", "commit"}, "", false},
	{[]string{"git", "-c", "core.editor=true", "-c", "push.default=current", "status"}, "", false},
	{[]string{"git", "-c", "aliasx.p=push", "status"}, "", false},
	{[]string{"git", "-C", "alias.p=push", "status"}, "", false},
	{[]string{"git", "log", "-c", "alias.p=push"}, "", false},
	{[]string{"git", "config", "alias.p", "push"}, "", false},
	{[]string{"git", "--config-env=core.editor=ED", "commit"}, "", false},

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
	{[]string{"rm", "-rf", "/srv/x"}, "delete-outside", false},
	{[]string{"rm", "-rf", "/"}, "delete-outside", false},
	{[]string{"rm", "-rf", "~"}, "delete-outside", false},
	{[]string{"sh", "-c", "rm -rf $HOME/.cache"}, "delete-outside", false},
	{[]string{"sh", "-c", `rm -rf "$HOME"`}, "delete-outside", false},
	{[]string{"rm", "-fr", "a", "./.."}, "delete-outside", false},
	{[]string{"rm", "-R", "--", "../x"}, "delete-outside", false},
	{[]string{"rm", "--force", "x/../../y"}, "delete-outside", false},
	{[]string{"rm", "--rec", "../x"}, "delete-outside", false},
	{[]string{"rm", "./../x", "-r"}, "delete-outside", false},
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

	// package-publish: the other registries.
	{[]string{"helm", "push", "chart-1.0.tgz", "oci://r/charts"}, "package-publish", false},
	{[]string{"helm", "--debug", "cm-push", "c", "repo"}, "package-publish", false},
	{[]string{"dotnet", "nuget", "push", "x.nupkg", "-k", "k"}, "package-publish", false},
	{[]string{"nuget", "push", "x.nupkg"}, "package-publish", false},
	{[]string{"deno", "publish", "--allow-dirty"}, "package-publish", false},
	{[]string{"jsr", "publish"}, "package-publish", false},
	{[]string{"lerna", "publish", "from-package"}, "package-publish", false},
	{[]string{"changeset", "publish"}, "package-publish", false},
	{[]string{"vsce", "publish"}, "package-publish", false},
	{[]string{"flutter", "pub", "publish", "--force"}, "package-publish", false},
	{[]string{"mix", "hex.publish"}, "package-publish", false},
	{[]string{"pod", "trunk", "push", "X.podspec"}, "package-publish", false},
	{[]string{"anaconda", "-t", "tok", "upload", "p.tar.bz2"}, "package-publish", false},
	{[]string{"helm", "pull", "oci://r/c"}, "", false},
	{[]string{"helm", "package", "."}, "", false},
	{[]string{"dotnet", "nuget", "locals", "all", "--clear"}, "", false},
	{[]string{"dotnet", "build"}, "", false},
	{[]string{"deno", "run", "main.ts"}, "", false},
	{[]string{"dart", "pub", "get"}, "", false},
	{[]string{"vsce", "package"}, "", false},
	{[]string{"pod", "install"}, "", false},

	// jvm-publish: Maven's deploy, Gradle's publishing tasks.
	{[]string{"mvn", "deploy"}, "jvm-publish", false},
	{[]string{"mvn", "-DskipTests", "deploy"}, "jvm-publish", false},
	{[]string{"mvn", "-B", "-ntp", "-P", "release", "clean", "deploy", "-DskipTests"}, "jvm-publish", false},
	{[]string{"./mvnw", "deploy"}, "jvm-publish", false},
	{[]string{"mvnd", "release:perform"}, "jvm-publish", false},
	{[]string{"mvn", "release:prepare", "release:perform"}, "jvm-publish", false},
	{[]string{"mvn", "deploy:deploy-file", "-Dfile=a.jar", "-Durl=https://r"}, "jvm-publish", false},
	{[]string{"mvn", "org.apache.maven.plugins:maven-deploy-plugin:3.1.1:deploy"}, "jvm-publish", false},
	{[]string{"mvn", "gpg:sign-and-deploy-file"}, "jvm-publish", false},
	{[]string{"mvn", "compile", "jib:build"}, "jvm-publish", false},
	{[]string{"mvn", "site-deploy"}, "jvm-publish", false},
	{[]string{"gradle", "publish"}, "jvm-publish", false},
	{[]string{"./gradlew", "publishToMavenCentral"}, "jvm-publish", false},
	{[]string{"./gradlew", "--no-daemon", "clean", "build", "publishAndReleaseToMavenCentral"}, "jvm-publish", false},
	{[]string{"gradle", ":lib:publish"}, "jvm-publish", false},
	{[]string{"gradle", "lib:sub:publish"}, "jvm-publish", false},
	{[]string{"gradle", "publishAllPublicationsToSonatypeRepository"}, "jvm-publish", false},
	{[]string{"gradle", "publishMavenPublicationToGitHubPackagesRepository"}, "jvm-publish", false},
	{[]string{"gradle", "publishPlugins"}, "jvm-publish", false},
	{[]string{"gradle", "publishToSonatype", "closeAndReleaseSonatypeStagingRepository"}, "jvm-publish", false},
	{[]string{"gradlew", "jib"}, "jvm-publish", false},
	{[]string{"mvn", "install"}, "", false},
	{[]string{"mvn", "-DskipTests", "clean", "install"}, "", false},
	{[]string{"mvn", "-Dmaven.deploy.skip=true", "verify"}, "", false},
	{[]string{"mvn", "dependency:tree"}, "", false},
	{[]string{"mvn", "release:clean"}, "", false},
	{[]string{"mvn", "compile", "jib:dockerBuild"}, "", false},
	{[]string{"mvn", "-Pdeploy", "package"}, "", false},
	{[]string{"gradle", "build"}, "", false},
	{[]string{"gradle", "publishToMavenLocal"}, "", false},
	{[]string{"./gradlew", ":lib:publishToMavenLocal"}, "", false},
	{[]string{"gradle", "publishMavenPublicationToMavenLocal"}, "", false},
	{[]string{"gradle", "-Ppublish=true", "build"}, "", false},
	{[]string{"gradle", "jibDockerBuild"}, "", false},
	{[]string{"gradle", "tasks", "--group", "publishing"}, "", false},

	// github-release, payments-messaging: options before the command.
	{[]string{"gh", "-R", "o/r", "pr", "merge", "12"}, "github-release", false},
	{[]string{"gh", "pr", "--repo=o/r", "merge", "12"}, "github-release", false},
	{[]string{"gh", "release", "new", "v1"}, "github-release", false},
	{[]string{"gh", "pr", "view", "12"}, "", false},
	{[]string{"gh", "pr", "list", "--search", "merge"}, "", false},
	{[]string{"gh", "release", "create", "v1", "--notes", "x"}, "github-release", false},

	// github-write: what gh posts, deletes or sets off.
	{[]string{"gh", "pr", "create", "--fill"}, "github-write", false},
	{[]string{"gh", "pr", "new", "-t", "x", "-b", "y"}, "github-write", false},
	{[]string{"gh", "pr", "comment", "12", "--body", "lgtm"}, "github-write", false},
	{[]string{"gh", "pr", "review", "12", "--approve"}, "github-write", false},
	{[]string{"gh", "-R", "o/r", "issue", "create", "-t", "x"}, "github-write", false},
	{[]string{"gh", "issue", "comment", "3", "-b", "x"}, "github-write", false},
	{[]string{"gh", "issue", "delete", "3", "--yes"}, "github-write", false},
	{[]string{"gh", "repo", "delete", "o/r", "--yes"}, "github-write", false},
	{[]string{"gh", "repo", "edit", "--visibility", "public"}, "github-write", false},
	{[]string{"gh", "repo", "archive", "o/r"}, "github-write", false},
	{[]string{"gh", "repo", "create", "o/r", "--public", "--source=.", "--push"}, "github-write", false},
	{[]string{"gh", "repo", "create", "o/r", "--private"}, "github-write", false},
	{[]string{"gh", "repo", "new"}, "github-write", false},
	{[]string{"gh", "release", "delete", "v1"}, "github-write", false},
	{[]string{"gh", "release", "upload", "v1", "a.tgz"}, "github-write", false},
	{[]string{"gh", "workflow", "run", "deploy.yml", "-f", "env=prod"}, "github-write", false},
	{[]string{"gh", "workflow", "--repo", "o/r", "run", "ci"}, "github-write", false},
	{[]string{"gh", "run", "rerun", "123"}, "github-write", false},
	{[]string{"gh", "secret", "set", "TOKEN", "--body", "x"}, "github-write", false},
	{[]string{"gh", "secret", "remove", "TOKEN"}, "github-write", false},
	{[]string{"gh", "variable", "delete", "V"}, "github-write", false},
	{[]string{"gh", "gist", "create", "--public", "f.txt"}, "github-write", false},
	{[]string{"gh", "pr", "view", "12", "--comments"}, "", false},
	{[]string{"gh", "pr", "diff", "12"}, "", false},
	{[]string{"gh", "pr", "checkout", "12"}, "", false},
	{[]string{"gh", "pr", "list", "--search", "review"}, "", false},
	{[]string{"gh", "issue", "list", "--label", "delete"}, "", false},
	{[]string{"gh", "issue", "view", "3"}, "", false},
	{[]string{"gh", "repo", "view", "o/r"}, "", false},
	{[]string{"gh", "repo", "clone", "o/r"}, "", false},
	{[]string{"gh", "release", "list"}, "", false},
	{[]string{"gh", "release", "download", "v1"}, "", false},
	{[]string{"gh", "workflow", "list"}, "", false},
	{[]string{"gh", "workflow", "view", "run"}, "", false},
	{[]string{"gh", "run", "list", "--workflow", "ci"}, "", false},
	{[]string{"gh", "run", "watch", "123"}, "", false},
	{[]string{"gh", "secret", "list"}, "", false},
	{[]string{"gh", "gist", "view", "abc"}, "", false},
	{[]string{"gh", "auth", "status"}, "", false},

	// github-api: a writing method, or a field or body with no method.
	{[]string{"gh", "api", "-X", "POST", "repos/o/r/issues"}, "github-api", false},
	{[]string{"gh", "api", "--method", "DELETE", "repos/o/r/git/refs/heads/x"}, "github-api", false},
	{[]string{"gh", "api", "--method=put", "repos/o/r/topics"}, "github-api", false},
	{[]string{"gh", "api", "-XPATCH", "repos/o/r"}, "github-api", false},
	{[]string{"gh", "api", "-X=POST", "repos/o/r/issues", "-f", "title=x"}, "github-api", false},
	{[]string{"gh", "api", "-X=DELETE", "repos/o/r"}, "github-api", false},
	{[]string{"gh", "api", "-iX=PUT", "repos/o/r/topics"}, "github-api", false},
	{[]string{"gh", "api", "--method=POST", "repos/o/r/issues"}, "github-api", false},
	{[]string{"gh", "api", "repos/o/r", "-iXDELETE"}, "github-api", false},
	{[]string{"gh", "api", "repos/o/r/issues", "-f", "title=x"}, "github-api", false},
	{[]string{"gh", "api", "repos/o/r/issues", "-ftitle=x"}, "github-api", false},
	{[]string{"gh", "api", "-H", "Accept: x", "repos/o/r/labels", "-F", "name=x"}, "github-api", true},
	{[]string{"gh", "api", "repos/o/r/labels", "--field", "name=x"}, "github-api", false},
	{[]string{"gh", "api", "repos/o/r/labels", "--raw-field=name=x"}, "github-api", false},
	{[]string{"gh", "api", "repos/o/r/labels", "--input", "l.json"}, "github-api", false},
	{[]string{"gh", "api", "repos/o/r/pulls/1/merge", "-f", "merge_method=squash", "-X", "GET"}, "github-api", false},
	{[]string{"gh", "api", "graphql", "-f", "query=mutation { addStar(input: {}) { x } }"}, "github-api", true},
	{[]string{"gh", "api", "graphql", "-F", "query=@q.graphql"}, "github-api", false},
	{[]string{"gh", "api", "graphql", "--input", "q.json"}, "github-api", false},
	{[]string{"gh", "api", "repos/o/r"}, "", false},
	{[]string{"gh", "api", "repos/o/r/pulls", "--paginate", "--jq", ".[].title"}, "", false},
	{[]string{"gh", "api", "-X", "GET", "search/issues", "-f", "q=repo:o/r"}, "", false},
	{[]string{"gh", "api", "-X=GET", "search/issues", "-f", "q=repo:o/r"}, "", false},
	{[]string{"gh", "api", "--method=GET", "search/issues", "-f", "q=repo:o/r"}, "", false},
	{[]string{"gh", "api", "--method", "GET", "search/code", "-F", "per_page=5"}, "", false},
	{[]string{"gh", "api", "-H", "Accept: application/vnd.github.raw", "repos/o/r/contents/f"}, "", true},
	{[]string{"gh", "api", "graphql", "-f", "query={ viewer { login } }"}, "", true},
	{[]string{"gh", "api", "graphql", "-F", "owner=o", "-f", "query=query($owner: String!) { x }"}, "", true},
	{[]string{"gh", "api", "user", "-q", ".login"}, "", false},
	{[]string{"aws", "sns", "--region", "x", "publish", "--message", "m"}, "payments-messaging", false},
	{[]string{"aws", "sns", "list-topics"}, "", false},

	// cloud: changes to what runs or is stored in a cloud account.
	{[]string{"aws", "s3", "rm", "--recursive", "s3://b/x"}, "cloud", false},
	{[]string{"aws", "s3", "rb", "s3://b", "--force"}, "cloud", false},
	{[]string{"aws", "s3", "mv", "s3://b/a", "./a"}, "cloud", false},
	{[]string{"aws", "s3", "cp", "dist/app.js", "s3://b/app.js"}, "cloud", false},
	{[]string{"aws", "s3", "cp", "-", "s3://b/k"}, "cloud", false},
	{[]string{"aws", "s3", "cp", "--expected-size", "10", "-", "s3://b/k"}, "cloud", false},
	{[]string{"gsutil", "cp", "-", "gs://b/k"}, "cloud", false},
	{[]string{"gcloud", "storage", "cp", "-", "gs://b/k"}, "cloud", false},
	{[]string{"aws", "--profile", "prod", "s3", "cp", "--recursive", "dist", "s3://b/"}, "cloud", false},
	{[]string{"aws", "s3", "sync", ".", "s3://b", "--delete"}, "cloud", false},
	{[]string{"aws", "s3", "cp", "s3://a/x", "s3://b/x"}, "cloud", false},
	{[]string{"aws", "s3api", "delete-object", "--bucket", "b", "--key", "k"}, "cloud", false},
	{[]string{"aws", "s3api", "put-bucket-policy", "--bucket", "b", "--policy", "file://p"}, "cloud", false},
	{[]string{"aws", "--region", "eu-west-1", "ec2", "terminate-instances", "--instance-ids", "i-1"}, "cloud", false},
	{[]string{"aws", "lambda", "update-function-code", "--function-name", "f"}, "cloud", false},
	{[]string{"aws", "cloudformation", "deploy", "--template-file", "t.yml"}, "cloud", false},
	{[]string{"aws", "ecs", "--region", "x", "update-service", "--force-new-deployment"}, "cloud", false},
	{[]string{"aws", "sns", "delete-topic", "--topic-arn", "a"}, "cloud", false},
	{[]string{"gcloud", "run", "deploy", "svc", "--image", "i"}, "cloud", false},
	{[]string{"gcloud", "app", "deploy"}, "cloud", false},
	{[]string{"gcloud", "compute", "instances", "delete", "vm1"}, "cloud", false},
	{[]string{"gcloud", "builds", "submit", "--tag", "gcr.io/p/i"}, "cloud", false},
	{[]string{"gcloud", "storage", "cp", "f", "gs://b/f"}, "cloud", false},
	{[]string{"gcloud", "storage", "rm", "gs://b/f"}, "cloud", false},
	{[]string{"gsutil", "-m", "rsync", "-r", "d", "gs://b/d"}, "cloud", false},
	{[]string{"gsutil", "rm", "gs://b/f"}, "cloud", false},
	{[]string{"fly", "deploy", "--remote-only"}, "cloud", false},
	{[]string{"flyctl", "apps", "destroy", "app"}, "cloud", false},
	{[]string{"vercel", "--prod"}, "cloud", false},
	{[]string{"vercel", "deploy", "--prebuilt"}, "cloud", false},
	{[]string{"netlify", "deploy", "--prod", "--dir", "dist"}, "cloud", false},
	{[]string{"wrangler", "deploy"}, "cloud", false},
	{[]string{"wrangler", "pages", "deploy", "dist"}, "cloud", false},
	{[]string{"wrangler", "publish"}, "cloud", false},
	{[]string{"firebase", "deploy", "--only", "hosting"}, "cloud", false},
	{[]string{"firebase", "hosting:channel:deploy", "preview"}, "cloud", false},
	{[]string{"pulumi", "up", "--yes"}, "cloud", false},
	{[]string{"pulumi", "destroy"}, "cloud", false},
	{[]string{"cdk", "deploy", "--all"}, "cloud", false},
	{[]string{"sls", "deploy", "--stage", "prod"}, "cloud", false},
	{[]string{"serverless", "remove"}, "cloud", false},
	{[]string{"aws", "s3", "ls", "s3://b"}, "", false},
	{[]string{"aws", "s3", "cp", "s3://b/f", "."}, "", false},
	{[]string{"aws", "s3", "cp", "--recursive", "s3://b/d", "d"}, "", false},
	{[]string{"aws", "s3", "sync", "s3://b", "./local"}, "", false},
	{[]string{"aws", "s3api", "list-objects", "--bucket", "b", "--prefix", "delete-me/"}, "", false},
	{[]string{"aws", "s3api", "get-object", "--bucket", "b", "--key", "put-x", "out"}, "", false},
	{[]string{"aws", "ec2", "describe-instances"}, "", false},
	{[]string{"aws", "sts", "get-caller-identity"}, "", false},
	{[]string{"aws", "cloudformation", "describe-stacks"}, "", false},
	{[]string{"gcloud", "run", "services", "list"}, "", false},
	{[]string{"gcloud", "config", "list"}, "", false},
	{[]string{"gcloud", "storage", "cp", "gs://b/f", "."}, "", false},
	{[]string{"gsutil", "ls", "gs://b"}, "", false},
	{[]string{"gsutil", "cp", "gs://b/f", "."}, "", false},
	{[]string{"gsutil", "cp", "gs://b/f", "-"}, "", false},
	{[]string{"gcloud", "storage", "cp", "gs://b/f", "-"}, "", false},
	{[]string{"aws", "s3", "cp", "s3://b/f", "-"}, "", false},
	{[]string{"fly", "status"}, "", false},
	{[]string{"fly", "logs"}, "", false},
	{[]string{"vercel", "dev"}, "", false},
	{[]string{"vercel", "env", "pull"}, "", false},
	{[]string{"netlify", "status"}, "", false},
	{[]string{"wrangler", "dev"}, "", false},
	{[]string{"firebase", "emulators:start"}, "", false},
	{[]string{"pulumi", "preview"}, "", false},
	{[]string{"cdk", "synth"}, "", false},
	{[]string{"cdk", "diff"}, "", false},
	{[]string{"sls", "offline"}, "", false},
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
		// argv itself, but for sh -c (whose words are not escaped here)
		// and git's own programs (git-lfs push), which Decide reads as
		// git lfs push.
		if tt.argv[0] != "sh" && !strings.HasPrefix(tt.argv[0], "git-") {
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
