//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

const rulesPolicy = `[[rules]]
name = "no force"
match = { command_regex = '^git push .*(-f|--force)( |$)' }
decision = "deny"
reason = "history is not rewritten here"
examples_match = [["git", "push", "origin", "--force"]]
examples_not_match = [["git", "push", "origin"]]

[[rules]]
name = "marker"
match = { command = ["touch", "marker-ask"] }
decision = "ask"
reason = "the test wants to be asked"
`

func writePolicy(t *testing.T, dir, content string) string {
	t.Helper()
	p := filepath.Join(dir, "rules.toml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyExplain(t *testing.T) {
	dir := t.TempDir()
	pol := writePolicy(t, dir, rulesPolicy)
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--", "ls", "-l"}, []string{"allowed: no rule matches"}},
		{[]string{"--", "sh", "-c", "make && git push"}, []string{"ask by rule irreversible/git-push: git push publishes", "decided by the simple command: git push"}},
		{[]string{"--policy", pol, "--", "bash", "-lc", "make; git push origin -f"}, []string{"deny by rule no force (" + pol + ":1): history is not rewritten here", "simple command: git push origin -f"}},
		{[]string{"--", "sh", "-c", "$(echo git) push"}, []string{"ask: the program's name is only known when the line runs ($(echo git))"}},
		// A word with a newline in it is shown as the rules read it.
		{[]string{"--", "git", "-c", "x.y=a\nb", "push"}, []string{"ask by rule irreversible/git-push", `the rules read it as: git -c x.y=a\x0ab push`}},
	} {
		code, out, errs := moat(t, dir, append([]string{"policy", "explain"}, tt.args...)...)
		for _, w := range tt.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("policy explain %q = %d %q %q, want %q", tt.args, code, out, errs, w)
			}
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	good := writePolicy(t, dir, rulesPolicy)
	code, out, errs := moat(t, dir, "policy", "check", good)
	if code != 0 || !strings.Contains(out, good+":1: no force: deny command_regex") || !strings.Contains(out, "(2 examples, all pass)") ||
		!strings.Contains(out, "marker: ask command touch marker-ask (no examples)") {
		t.Errorf("policy check good = %d %q %q", code, out, errs)
	}
	// A host rule is shown with what narrows it (before, its method and
	// path were left out).
	hostRule := writePolicy(t, t.TempDir(), "[network]\nmode = \"allow\"\nallow = [\"example.com\"]\n[[rules]]\nname = \"up\"\nmatch = { host = \"example.com\", method = \"POST\", path = \"/upload\" }\ndecision = \"deny\"\n")
	if code, out, errs := moat(t, dir, "policy", "check", hostRule); code != 0 || !strings.Contains(out, "up: deny POST host example.com/upload") {
		t.Errorf("policy check of a host rule = %d %q %q", code, out, errs)
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[[rules]]\nmatch = { command = [\"git\", \"push\"] }\ndecision = \"ask\"\nexamples_match = [[\"git\", \"pull\"]]\nexamples_not_macth = []\n"), 0o644)
	code, out, errs = moat(t, dir, "policy", "check", bad)
	for _, w := range []string{bad + ":5: rules[0].examples_not_macth: unknown key, did you mean examples_not_match?"} {
		if code != 1 || !strings.Contains(errs, w) {
			t.Errorf("policy check bad = %d %q %q, want %q", code, out, errs, w)
		}
	}
	os.WriteFile(bad, []byte("[[rules]]\nmatch = { command = [\"git\", \"push\"] }\ndecision = \"ask\"\nexamples_match = [[\"git\", \"pull\"]]\n"), 0o644)
	code, _, errs = moat(t, dir, "policy", "check", bad)
	if w := bad + `:4: rules[0].examples_match[0]: the rule does not match its own example ["git" "pull"]`; code != 1 || !strings.Contains(errs, w) {
		t.Errorf("policy check bad example = %d %q, want %q", code, errs, w)
	}
	// What moat run refuses, policy check refuses, in the file's order: a
	// public suffix in the allow list beside the policy's own errors.
	os.WriteFile(bad, []byte("[network]\nmode = \"allow\"\nallow = [\"*.co.uk\", \"example.com\"]\n[limits]\nmemory = \"1B\"\n"), 0o644)
	code, _, errs = moat(t, dir, "policy", "check", bad)
	first, second := bad+`:3: network.allow[0]: "*.co.uk": too broad`, bad+":5: limits.memory: 1B is too small"
	if i, j := strings.Index(errs, first), strings.Index(errs, second); code != 1 || i < 0 || j < i {
		t.Errorf("policy check of a public suffix = %d %q, want %q then %q", code, errs, first, second)
	}
	// A problem both checks find is listed once (it was twice).
	os.WriteFile(bad, []byte("[network]\nmode = \"allow\"\nallow = [\"1.2.3.4\"]\n"), 0o644)
	_, _, errs = moat(t, dir, "policy", "check", bad)
	if addr := bad + `:3: network.allow[0]: "1.2.3.4": an IP address`; strings.Count(errs, addr) != 1 {
		t.Errorf("policy check lists %q %d times:\n%s", addr, strings.Count(errs, addr), errs)
	}
	// A disk limit over a direct workspace, which run refuses unless
	// degraded, is warned of (it passed without a word); the control: an
	// overlay's passes quietly.
	for mode, warn := range map[string]bool{"direct": true, "overlay": false} {
		pol := writePolicy(t, t.TempDir(), "[workspace]\nmode = \""+mode+"\"\n[limits]\ndisk = \"1G\"\n")
		code, _, errs := moat(t, dir, "policy", "check", pol)
		if code != 0 || strings.Contains(errs, "unless --allow-degraded: disk limit") != warn {
			t.Errorf("policy check of a disk limit over a %s workspace = %d %q", mode, code, errs)
		}
	}
	// A read-write path run refuses (/, one holding the home directory)
	// is refused by check too, and one under an overlay's disk limit is
	// warned of (check passed both without a word). The control: a
	// plain read-write directory passes quietly.
	rwDir := t.TempDir()
	for pol, want := range map[string]string{
		"[filesystem]\nread_write = [\"/\"]\n":  "filesystem.read_write[0]: / is /",
		"[filesystem]\nread_write = [\"~/\"]\n": "contains your home directory",
		"[workspace]\nmode = \"overlay\"\n[limits]\ndisk = \"1G\"\n[filesystem]\nread_write = [\"" + rwDir + "\"]\n": "unless --allow-degraded: disk limit (limits.disk / --disk) not enforced on " + rwDir,
		"[filesystem]\nread_write = [\"" + rwDir + "\"]\n":                                                           "",
	} {
		f := writePolicy(t, t.TempDir(), pol)
		code, _, errs := moat(t, dir, "policy", "check", f)
		warning := strings.Contains(want, "unless")
		if want == "" && (code != 0 || errs != "") || want != "" && (!strings.Contains(errs, want) || (code == 0) != warning) {
			t.Errorf("policy check of %q = %d %q, want %q", pol, code, errs, want)
		}
	}
	// The seccomp profile a policy names is read and checked as run
	// checks it, beside the policy (before, policy check passed a
	// profile run refused). The control: an allowing profile passes.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	os.WriteFile(filepath.Join(sub, "none.json"), []byte(`{"defaultAction": "SCMP_ACT_ERRNO"}`), 0o644)
	os.WriteFile(filepath.Join(sub, "all.json"), []byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`), 0o644)
	for file, want := range map[string]string{"none.json": "no program can start under this profile", "missing.json": "no such file", "all.json": ""} {
		pol := filepath.Join(sub, "p.toml")
		os.WriteFile(pol, []byte("[syscalls]\nprofile = \""+file+"\"\n"), 0o644)
		code, _, errs := moat(t, dir, "policy", "check", pol)
		if want == "" && code != 0 || want != "" && (code != 1 || !strings.Contains(errs, pol+":2: syscalls.profile: "+filepath.Join(sub, file)) || !strings.Contains(errs, want)) {
			t.Errorf("policy check of profile %s = %d %q, want %q", file, code, errs, want)
		}
	}
}

// readAudit returns the records of an audit stream, after checking its
// chain with moat audit verify.
func readAudit(t *testing.T, path string) []map[string]any {
	t.Helper()
	if code, out, errs := moat(t, t.TempDir(), "audit", "verify", path); code != 0 || !strings.Contains(out, "chain intact") {
		t.Fatalf("audit verify = %d %q %q", code, out, errs)
	}
	b, _ := os.ReadFile(path)
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		recs = append(recs, rec)
	}
	return recs
}

func TestRunDenied(t *testing.T) {
	ws := t.TempDir()
	pol := writePolicy(t, t.TempDir(), rulesPolicy)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	report := filepath.Join(t.TempDir(), "report.json")
	code, _, errs := moat(t, ws, "run", "--policy", pol, "--workspace", ws, "--audit", auditFile, "--report", report, "--",
		"sh", "-c", "touch marker; git push origin --force")
	if code != exitMoatError || !strings.Contains(errs, "refused by the harness: rule no force ("+pol+":1) denies git push origin --force: history is not rewritten here") {
		t.Errorf("denied run = %d %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(ws, "marker")); err == nil {
		t.Error("the denied command ran: the marker exists")
	}
	var rep struct {
		Reason   string
		Decision struct {
			Verdict string
			Rule    struct{ Name string }
		}
	}
	b, _ := os.ReadFile(report)
	if err := json.Unmarshal(b, &rep); err != nil || rep.Reason != "denied" || rep.Decision.Verdict != "deny" || rep.Decision.Rule.Name != "no force" {
		t.Errorf("report = %s", b)
	}
	recs := readAudit(t, auditFile)
	if len(recs) != 2 || recs[0]["type"] != "decision" || recs[0]["verdict"] != "deny" || recs[1]["reason"] != "denied" {
		t.Errorf("audit records = %v", recs)
	}
}

// TestAskWithoutTerminal: with no controlling terminal there is nobody to
// ask, and an ask refuses the run, saying how to get it through.
func TestAskWithoutTerminal(t *testing.T) {
	ws := t.TempDir()
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	cmd := exec.Command(os.Args[0], "run", "--workspace", ws, "--audit", auditFile, "--", "sh", "-c", "touch marker && git push")
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitMoatError ||
		!strings.Contains(string(out), "rule irreversible/git-push asks before git push") ||
		!strings.Contains(string(out), "nobody can be asked here: run moat in a terminal to approve it") {
		t.Errorf("ask without a terminal = %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "marker")); err == nil {
		t.Error("the asked command ran: the marker exists")
	}
	recs := readAudit(t, auditFile)
	if recs[0]["verdict"] != "ask" || recs[0]["outcome"] != "no approver" {
		t.Errorf("decision record = %v", recs[0])
	}
}

// TestTTYApprover: on a terminal, the person sees the command, where it
// runs and the rule, and answers.
func TestTTYApprover(t *testing.T) {
	for _, tt := range []struct {
		answer  string
		code    int
		ran     bool
		outcome string
	}{{"y", 0, true, "approved"}, {"n", exitMoatError, false, "denied"}} {
		t.Run(tt.answer, func(t *testing.T) {
			ws := t.TempDir()
			pol := writePolicy(t, t.TempDir(), rulesPolicy)
			auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
			o := newOuterTerminal(t)
			cmd := o.start(t, ws, "run", "--policy", pol, "--workspace", ws, "--audit", auditFile, "--", "touch", "marker-ask")
			o.waitFor(t, "[N] no: ")
			for _, w := range []string{"rule marker (" + pol + ":9) asks", `command: ["touch" "marker-ask"]`, "in: " + ws, "reason: the test wants to be asked"} {
				if !strings.Contains(o.shown(), w) {
					t.Errorf("the prompt lacks %q: %q", w, o.shown())
				}
			}
			o.master.Write([]byte(tt.answer + "\n"))
			if code := o.wait(t, cmd); code != tt.code {
				t.Errorf("exit %d, want %d; terminal: %q", code, tt.code, o.shown())
			}
			if _, err := os.Stat(filepath.Join(ws, "marker-ask")); (err == nil) != tt.ran {
				t.Errorf("marker exists: %v, want %v", err == nil, tt.ran)
			}
			recs := readAudit(t, auditFile)
			if recs[0]["outcome"] != tt.outcome || recs[0]["approver"] != "tty" {
				t.Errorf("decision record = %v", recs[0])
			}
		})
	}
}

func TestAuditVerifyCLI(t *testing.T) {
	ws := t.TempDir()
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	for i := 0; i < 3; i++ {
		if code, _, errs := moat(t, ws, "run", "--audit", auditFile, "--", "true"); code != 0 {
			t.Fatalf("run: %d %s", code, errs)
		}
	}
	if code, out, _ := moat(t, ws, "audit", "verify", auditFile); code != 0 || !strings.HasPrefix(out, "3 records, chain intact") {
		t.Errorf("verify = %d %q", code, out)
	}
	b, _ := os.ReadFile(auditFile)
	os.WriteFile(auditFile, []byte(strings.Replace(string(b), `"exit_code":0`, `"exit_code":1`, 1)), 0o600)
	// Line 1 may be the edited one: it is not said to be intact (it was,
	// in the same sentence that said it may have been edited).
	if code, out, _ := moat(t, ws, "audit", "verify", auditFile); code != 1 || !strings.Contains(out, auditFile+":2: chain broken: its prev is not the SHA-256 of line 1") ||
		!strings.Contains(out, "(no line before it is known to be intact)") {
		t.Errorf("verify edited = %d %q", code, out)
	}
	// A broken stream is not extended.
	if code, _, errs := moat(t, ws, "run", "--audit", auditFile, "--", "true"); code != 0 && !strings.Contains(errs, "write to a new file") {
		t.Errorf("run onto an edited stream = %d %q", code, errs)
	}
}

// TestTTYApproverScopes: programs a script starts are asked about on the
// terminal while the command runs (its stdin is not the terminal): a
// prefix approval lets the same command start again unasked, a refusal
// fails the exec, and an ask left unanswered times out. Each outcome is
// an audit record with who, scope and expiry.
func TestTTYApproverScopes(t *testing.T) {
	script := "x=marker-ask; for f in a1 a2 a3; do touch $x $f; done; echo done"
	for _, tt := range []struct {
		name    string
		answers []string // typed at each prompt, in order
		files   bool
		asks    int
		outcome string
		scope   string
	}{
		{"prefix", []string{"p", "touch marker-ask", "1m"}, true, 1, "approved", "prefix"},
		{"once", []string{"y", "y", "y"}, true, 3, "approved", "once"},
		{"no", []string{"n", "n", "n"}, false, 3, "denied", ""},
		{"timeout", nil, false, 3, "timeout", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			pol := writePolicy(t, t.TempDir(), rulesPolicy+"\n[harness]\nask_timeout = \"1s\"\n")
			auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
			o := newOuterTerminal(t)
			cmd := exec.Command(os.Args[0], "run", "--policy", pol, "--workspace", ws, "--audit", auditFile, "--", "sh", "-c", script)
			null, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			cmd.Stdin = null
			o.startCmd(t, ws, cmd)
			prompts := 0
			for _, a := range tt.answers {
				// Each answer waits for its own question to show.
				switch a {
				case "p", "y", "n":
					prompts++
					o.waitForN(t, "[N] no: ", prompts)
				case "1m":
					o.waitFor(t, "For how long?")
				default:
					o.waitFor(t, "Prefix (words")
				}
				o.master.Write([]byte(a + "\n"))
			}
			o.wait(t, cmd)
			if n := strings.Count(o.shown(), "[N] no: "); n != tt.asks {
				t.Errorf("asked %d times, want %d; terminal: %q", n, tt.asks, o.shown())
			}
			for _, f := range []string{"a1", "a2", "a3"} {
				if _, err := os.Stat(filepath.Join(ws, f)); (err == nil) != tt.files {
					t.Errorf("%s exists: %v, want %v", f, err == nil, tt.files)
				}
			}
			var found bool
			for _, r := range readAudit(t, auditFile) {
				if r["type"] != "decision" || r["at"] != "exec" {
					continue
				}
				found = true
				if r["outcome"] != tt.outcome || r["approver"] != "tty" || r["time"] == nil {
					t.Errorf("exec record = %v, want outcome %q by tty", r, tt.outcome)
				}
				if tt.scope != "" && r["scope"] != tt.scope {
					t.Errorf("exec record scope = %v, want %q", r["scope"], tt.scope)
				}
				if tt.scope == "prefix" && r["expires"] == nil {
					t.Errorf("a prefix approval without its expiry: %v", r)
				}
			}
			if !found {
				t.Errorf("no exec decision in the audit stream")
			}
		})
	}
}

// TestLearnAndSuggest: --learn lets through what the rules ask about (a
// program a script starts, with nobody to ask: rm -rf of a path through
// .., which the built-in set asks about) and audits it; policy
// suggest turns the stream into an allow rule quoting the record, which,
// added to the policy, decides the command. Positive control: the same
// run without --learn refuses the program.
func TestLearnAndSuggest(t *testing.T) {
	for _, learn := range []bool{false, true} {
		ws := t.TempDir()
		pol := writePolicy(t, t.TempDir(), rulesPolicy)
		auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
		args := []string{"run", "--policy", pol, "--workspace", ws, "--audit", auditFile}
		if learn {
			args = append(args, "--learn")
		}
		script := "mkdir x; d=x/../moat-learn; mkdir $d; rm -rf $d; test -e $d && echo kept || echo removed"
		cmd := exec.Command(os.Args[0], append(args, "--", "sh", "-c", script)...)
		cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
		out, _ := cmd.CombinedOutput()
		want := "kept"
		if learn {
			want = "removed"
		}
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("learn %v: output %q, want %s", learn, out, want)
		}
		if !learn {
			continue
		}
		code, sugg, errs := moat(t, ws, "policy", "suggest", auditFile)
		if code != 0 || !strings.Contains(sugg, `match = { command = ["rm"] }`) || !strings.Contains(sugg, "ask by irreversible/delete-outside (learn)") {
			t.Fatalf("suggest = %d %q %q", code, sugg, errs)
		}
		b, _ := os.ReadFile(pol)
		body := sugg[strings.Index(sugg, "[[rules]]"):]
		if err := os.WriteFile(pol, append(b, "\n"+body...), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := moat(t, ws, "policy", "explain", "--policy", pol, "--", "rm", "-rf", "/tmp/x"); code != 0 || !strings.Contains(out, "allow by rule allow-rm") {
			t.Errorf("explain after the suggestion = %d %q %q", code, out, errs)
		}
	}
}

// TestInteractiveRunRefusesInRunAsks: when moat's stdin is the terminal,
// the command has it, and a program it starts that the rules ask about is
// refused rather than asked about (a question would race the command for
// the keys); the report says why. Positive control: the same program from
// the command line is asked about before the run, and runs when approved.
func TestInteractiveRunRefusesInRunAsks(t *testing.T) {
	ws := t.TempDir()
	pol := writePolicy(t, t.TempDir(), rulesPolicy)
	report := filepath.Join(t.TempDir(), "report.json")
	o := newOuterTerminal(t)
	cmd := o.start(t, ws, "run", "--policy", pol, "--workspace", ws, "--report", report, "--", "sh", "-c", "x=marker-ask; touch $x; echo status $?")
	o.waitFor(t, "status 126")
	o.wait(t, cmd)
	if strings.Contains(o.shown(), "[N] no: ") {
		t.Errorf("asked during an interactive run: %q", o.shown())
	}
	if _, err := os.Stat(filepath.Join(ws, "marker-ask")); err == nil {
		t.Error("the program ran")
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "the terminal is the command's during an interactive run") {
		t.Errorf("the report does not say why: %s", b)
	}

	o = newOuterTerminal(t)
	cmd = o.start(t, ws, "run", "--policy", pol, "--workspace", ws, "--", "touch", "marker-ask")
	o.waitFor(t, "[N] no: ")
	o.master.Write([]byte("y\n"))
	if code := o.wait(t, cmd); code != 0 {
		t.Errorf("approved command line: exit %d; terminal %q", code, o.shown())
	}
	if _, err := os.Stat(filepath.Join(ws, "marker-ask")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
}

// TestSessionLearnAndSuggest: the same learning through the daemon: a
// session made with --learn runs what the rules would ask about, its
// decisions land in moat serve's audit stream with the outcome "learn",
// and moat policy suggest turns them into a rule. The positive control: a
// session without --learn refuses the same command.
func TestSessionLearnAndSuggest(t *testing.T) {
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	sock, logs := startServe(t, "--audit", auditFile, "--approval-timeout", "1s")
	ws := t.TempDir()
	script := "mkdir x; d=x/../moat-learn; mkdir $d; rm -rf $d; test -e $d && echo kept || echo removed"
	for _, learn := range []bool{false, true} {
		args := []string{"session", "create", "--socket", sock, "--temp"}
		if learn {
			args = append(args, "--learn")
		}
		code, id, errs := moat(t, ws, args...)
		if code != 0 {
			t.Fatalf("session create: %d %q\n%s", code, errs, logs)
		}
		id = strings.TrimSpace(id)
		_, out, errs := moat(t, ws, "exec", "--socket", sock, id, "--", "sh", "-c", script)
		want := "kept"
		if learn {
			want = "removed"
		}
		if !strings.Contains(out, want+"\n") {
			t.Errorf("learn %v: output %q %q, want %s", learn, out, errs, want)
		}
		moat(t, ws, "session", "rm", "--socket", sock, id)
	}
	code, sugg, errs := moat(t, ws, "policy", "suggest", auditFile)
	if code != 0 || !strings.Contains(sugg, `match = { command = ["rm"] }`) || !strings.Contains(sugg, "(learn)") {
		t.Fatalf("suggest = %d %q %q", code, sugg, errs)
	}
}

// TestQuestionHoldsOutput: while a program the command starts is asked
// about on the terminal, the command's other processes write on, to the
// same terminal; they could redraw the question (a harmless command in
// place of the one asked about) or hide it. The command's output waits
// until the question is answered, the question starts with the
// terminal's rendering and scroll region reset (the command made its text
// invisible and kept scrolling to two lines, where the question's lines
// scrolled out of sight under a fake one drawn above), and
// a line typed before the question showed does not answer it. The
// person's answer typed after the question approves (the control), and
// the output held back is shown then.
func TestQuestionHoldsOutput(t *testing.T) {
	for _, tt := range []struct {
		name    string
		ahead   bool // type "y" before the question shows, and nothing after
		ran     bool
		outcome string
	}{
		{"answered", false, true, "approved"},
		{"typed ahead", true, false, "timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			pol := writePolicy(t, t.TempDir(), rulesPolicy+"\n[harness]\nask_timeout = \"3s\"\n")
			auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
			o := newOuterTerminal(t)
			// The background job writes while the question waits; the
			// invisible attribute and a two-line scroll region, in which
			// the question would scroll out of sight, are set before the
			// ask.
			script := `x=marker-ask; printf 'BEF%sORE\033[8m\033[23;24r\n'; (sleep 1; printf '%s%s\n' SPOO FED) & sleep 0.5; touch $x; wait; echo done`
			cmd := exec.Command(os.Args[0], "run", "--policy", pol, "--workspace", ws, "--audit", auditFile, "--", "sh", "-c", script)
			null, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			cmd.Stdin = null
			o.startCmd(t, ws, cmd)
			if tt.ahead {
				o.waitFor(t, "BEFORE")
				o.master.Write([]byte("y\n"))
			}
			o.waitFor(t, "[N] no: ")
			time.Sleep(1500 * time.Millisecond) // the background job has written by now
			shown := o.shown()
			q := strings.Index(shown, "moat: rule marker")
			if q < 0 || strings.Contains(shown, "SPOOFED") {
				t.Errorf("the command's output was shown while the question waited: %q", shown)
			}
			// (The terminal adds a carriage return to the question's
			// newline.)
			if reset := strings.TrimSuffix(questionReset, "\r\n\x1b[J"); q >= 0 && (!strings.Contains(shown[strings.Index(shown, "\x1b[8m"):q], reset) || !strings.HasSuffix(shown[:q], "\n\x1b[J")) {
				t.Errorf("the question does not reset the rendering and the scroll region the command set: %q", shown)
			}
			if !tt.ahead {
				o.master.Write([]byte("y\n"))
			}
			o.wait(t, cmd)
			shown = o.shown()
			if _, err := os.Stat(filepath.Join(ws, "marker-ask")); (err == nil) != tt.ran {
				t.Errorf("the asked program ran: %v, want %v; terminal: %q", err == nil, tt.ran, shown)
			}
			if i := strings.Index(shown, "SPOOFED"); i < strings.Index(shown, "[N] no: ") {
				t.Errorf("the output held back was not shown after the answer: %q", shown)
			}
			var found bool
			for _, r := range readAudit(t, auditFile) {
				if r["type"] == "decision" && r["at"] == "exec" {
					found = true
					if r["outcome"] != tt.outcome {
						t.Errorf("exec record = %v, want outcome %q", r, tt.outcome)
					}
				}
			}
			if !found {
				t.Errorf("no exec decision in the audit stream")
			}
		})
	}
}

// TestQuestionPipedOutput: output that is no terminal is not held while
// a question is on the terminal. moat's stdout is a pipe nobody reads
// until the answer (moat run … | less): a write blocked on it must not
// keep the question off the terminal. TestQuestionHoldsOutput is the
// control: output to the terminal is held.
func TestQuestionPipedOutput(t *testing.T) {
	ws := t.TempDir()
	pol := writePolicy(t, t.TempDir(), rulesPolicy+"\n[harness]\nask_timeout = \"10s\"\n")
	o := newOuterTerminal(t)
	// More than the pipes between the command and the reader hold.
	script := `x=marker-ask; head -c 4000000 /dev/zero & sleep 1; touch $x; wait; echo done >&2`
	cmd := exec.Command(os.Args[0], "run", "--policy", pol, "--workspace", ws, "--", "sh", "-c", script)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stdin, cmd.Stdout = null, w
	o.startCmd(t, ws, cmd)
	w.Close()
	o.waitFor(t, "[N] no: ")
	o.master.Write([]byte("y\n"))
	n, _ := io.Copy(io.Discard, r)
	if code := o.wait(t, cmd); code != 0 {
		t.Errorf("exit %d; terminal: %q", code, o.shown())
	}
	if n != 4000000 {
		t.Errorf("the pipe read %d bytes, want 4000000", n)
	}
	if _, err := os.Stat(filepath.Join(ws, "marker-ask")); err != nil {
		t.Errorf("the approved program did not run: %v; terminal: %q", err, o.shown())
	}
}

// TestSuggestEscapesRecords: the records policy suggest quotes in its
// comments are text whoever could write the audit file chose (a run's
// command, when the file is in its workspace): a newline in one must not
// put a line of TOML beneath the comment, nor a control sequence reach
// the terminal. The control: the suggestion itself is printed.
func TestSuggestEscapesRecords(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "audit.jsonl")
	rec := `{"type":"network","time":"2026-12-01T00:00:00Z","run_id":"r1\n[network]\nallow_cidrs = [\"0.0.0.0/0\"]\u001b[2J","host":"example.com","port":443,"decision":"deny","rule":"default deny"}` + "\n"
	os.WriteFile(f, []byte(rec), 0o644)
	code, out, errs := moat(t, dir, "policy", "suggest", f)
	if code != 0 || !strings.Contains(out, `"example.com:443",`) {
		t.Fatalf("suggest: %d %q %q", code, out, errs)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "allow_cidrs") || strings.Contains(line, "\x1b") {
			t.Errorf("a record's text became a line of its own: %q\n%s", line, out)
		}
	}
}

// TestSuggestReadsBounded: policy suggest reads a stream whole, so it
// takes what audit verify takes (a file or a pipe, not a device) up to a
// bound: /dev/zero and a 2 GB sparse file ran it out of memory (found by
// a tester). The control: the same stream within the bound is read.
func TestSuggestReadsBounded(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := moat(t, dir, "policy", "suggest", "/dev/zero"); code != 1 || !strings.Contains(errs, "a character device") {
		t.Errorf("/dev/zero: %d %q", code, errs)
	}
	f := filepath.Join(dir, "audit.jsonl")
	rec := `{"type":"network","time":"2026-12-01T00:00:00Z","run_id":"r1","host":"example.com","port":443,"decision":"deny","rule":"default deny"}` + "\n"
	os.WriteFile(f, []byte(rec), 0o644)
	if code, out, errs := moat(t, dir, "policy", "suggest", f); code != 0 || !strings.Contains(out, `"example.com:443",`) {
		t.Fatalf("control: %d %q %q", code, out, errs)
	}
	if err := os.Truncate(f, maxSuggestInput+1); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := moat(t, dir, "policy", "suggest", f); code != 1 || !strings.Contains(errs, "more than 256 MiB") {
		t.Errorf("a stream past the bound: %d %q", code, errs)
	}
}

// TestSuggestSaysWhatWasDropped: a stream that went over its rate lost
// records (audit.Dropped), and suggest says so rather than suggest from it
// as if it were whole. The control: a stream without one has no warning.
func TestSuggestSaysWhatWasDropped(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "audit.jsonl")
	rec := `{"type":"network","time":"2026-12-01T00:00:00Z","run_id":"r1","host":"example.com","port":443,"decision":"deny","rule":"default deny"}` + "\n"
	os.WriteFile(f, []byte(rec), 0o644)
	code, out, errs := moat(t, dir, "policy", "suggest", f)
	if code != 0 || !strings.Contains(out, `"example.com:443",`) || strings.Contains(errs, "not written") {
		t.Fatalf("suggest of a whole stream: %d %q %q", code, out, errs)
	}
	rec += `{"type":"dropped","time":"2026-12-01T00:00:01Z","run_id":"r1","count":1234,"types":{"network":1234},"since":"2026-12-01T00:00:00Z"}` + "\n"
	os.WriteFile(f, []byte(rec), 0o644)
	code, out, errs = moat(t, dir, "policy", "suggest", f)
	if code != 0 || !strings.Contains(out, `"example.com:443",`) || !strings.Contains(errs, "1234 records were not written") {
		t.Fatalf("suggest of a stream with dropped records: %d %q %q", code, out, errs)
	}
}

// TestSuggestValidates: what policy suggest prints is a policy that loads,
// whatever destinations the records name. Host entries match names only,
// so an IP destination the proxy refused is suggested in allow_cidrs, a
// private one not at all, and a destination no entry can name is a
// comment. The control: the suggestions themselves are there.
func TestSuggestValidates(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "audit.jsonl")
	var recs strings.Builder
	for _, d := range []struct {
		host string
		port int
		rule string
	}{
		{"pypi.org", 443, "default deny"},
		{"93.184.215.14", 443, "default deny"},
		{"2606:4700::1111", 443, "default deny"},
		{"[2001:4860:4860::8888]", 53, "default deny"},
		{"10.0.0.1", 80, "private address 10.0.0.1 (RFC 1918)"},
		// Not what the proxy writes for these, but what a file may say.
		{"192.168.1.1", 80, "default deny"},
		{"::1", 80, "default deny"},
		{"co.uk", 443, "default deny"},
		{"a b", 443, "default deny"},
	} {
		fmt.Fprintf(&recs, `{"type":"network","time":"2026-12-01T00:00:00Z","run_id":"r1","host":%q,"port":%d,"decision":"deny","rule":%q}`+"\n", d.host, d.port, d.rule)
	}
	os.WriteFile(f, []byte(recs.String()), 0o644)
	code, out, errs := moat(t, dir, "policy", "suggest", f)
	if code != 0 {
		t.Fatalf("suggest: %d %q %q", code, out, errs)
	}
	p, err := policy.Parse("suggested.toml", []byte(out))
	if err != nil {
		t.Fatalf("the suggestion does not parse: %v\n%s", err, out)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("the suggestion is not a valid policy: %v\n%s", err, out)
	}
	if err := sandbox.CheckPolicy(p); err != nil {
		t.Fatalf("the suggestion is refused at run: %v\n%s", err, out)
	}
	if !slices.Equal(p.Network.Allow, []string{"pypi.org:443"}) {
		t.Errorf("network.allow = %q\n%s", p.Network.Allow, out)
	}
	if !slices.Equal(p.Network.AllowCIDRs, []string{"93.184.215.14/32", "2606:4700::1111/128", "2001:4860:4860::8888/128"}) {
		t.Errorf("network.allow_cidrs = %q\n%s", p.Network.AllowCIDRs, out)
	}
	for _, want := range []string{"192.168.1.1 is not a public address", "::1 is not a public address", `# "co.uk:443",`, `"a b:443" is no network.allow entry`} {
		if !strings.Contains(out, want) {
			t.Errorf("no comment %q:\n%s", want, out)
		}
	}
}

// TestTTYApproverInterrupted: SIGTERM (or Ctrl-C, SIGHUP) while a
// question is on the terminal answers it no, at once: the command does
// not run and moat says why. Before, SIGTERM was forwarded to a command
// that did not exist yet, and moat waited for the ask's timeout (five
// minutes), tried.
func TestTTYApproverInterrupted(t *testing.T) {
	ws := t.TempDir()
	pol := writePolicy(t, t.TempDir(), rulesPolicy)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	o := newOuterTerminal(t)
	cmd := o.start(t, ws, "run", "--policy", pol, "--workspace", ws, "--audit", auditFile, "--", "touch", "marker-ask")
	o.waitFor(t, "[N] no: ")
	time.Sleep(100 * time.Millisecond) // past the 50 ms after which signals are forwarded
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	code := o.wait(t, cmd)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("moat took %v to end after SIGTERM", took)
	}
	if code != exitMoatError || !strings.Contains(o.shown(), "SIGTERM; not run") {
		t.Errorf("exit %d; terminal: %q", code, o.shown())
	}
	if _, err := os.Stat(filepath.Join(ws, "marker-ask")); err == nil {
		t.Error("the command ran")
	}
	// Nobody refused it: the ask was cut short.
	if recs := readAudit(t, auditFile); recs[0]["outcome"] != "cancelled" || strings.Contains(fmt.Sprint(recs), "context canceled") {
		t.Errorf("decision record = %v", recs[0])
	}
}

// TestPolicyExplainByFile: explain decides the line's program by the file
// it is, as moat run does: a link named tool to a denied program was
// "allowed: no rule matches" while the run refused it (found by a
// tester). The control: a link to an allowed program is allowed.
func TestPolicyExplainByFile(t *testing.T) {
	dir := t.TempDir()
	pol := writePolicy(t, dir, "[[rules]]\nname = \"no-id\"\nmatch = { command = [\"id\"] }\ndecision = \"deny\"\n")
	os.Symlink("/usr/bin/id", filepath.Join(dir, "tool"))
	os.Symlink("/usr/bin/true", filepath.Join(dir, "fine"))
	if code, out, errs := moat(t, dir, "policy", "explain", "--policy", pol, "--", "./tool"); code != 0 || !strings.Contains(out, "deny by rule no-id") {
		t.Errorf("explain ./tool: %d %q %q, want the deny", code, out, errs)
	}
	if code, out, errs := moat(t, dir, "policy", "explain", "--policy", pol, "--", "./fine"); code != 0 || !strings.Contains(out, "allowed") {
		t.Errorf("control: explain ./fine: %d %q %q", code, out, errs)
	}
}

// TestRunAuditBounded: --audit-burst and --audit-rate bound a run's
// stream: refused connections beyond them are counted in a dropped
// record, and the run's own record is kept. The control: the first
// records, within the burst, are written. Bad bounds, or bounds without
// --audit, are refused before anything runs.
func TestRunAuditBounded(t *testing.T) {
	ws := t.TempDir()
	for _, bad := range [][]string{
		{"--audit-rate", "5"},
		{"--audit", filepath.Join(t.TempDir(), "a.jsonl"), "--audit-burst", "0"},
		{"--audit", filepath.Join(t.TempDir(), "a.jsonl"), "--audit-rate", "-1"},
	} {
		code, _, errs := moat(t, ws, append(append([]string{"run"}, bad...), "--", "true")...)
		if code != exitMoatError || !strings.Contains(errs, "--audit-") {
			t.Errorf("%q: exit %d %q: want it refused", bad, code, errs)
		}
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	code, _, errs := moat(t, ws, "run", "--net", "allow:example.com", "--audit", path, "--audit-burst", "2", "--audit-rate", "1", "--",
		"sh", "-c", `for i in 1 2 3 4 5 6; do curl -s -m 2 http://10.1.2.3/ >/dev/null; done; true`)
	if code != 0 {
		t.Fatalf("run: %d %s", code, errs)
	}
	b, _ := os.ReadFile(path)
	types := map[string]int{}
	dropped := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			Type  string `json:"type"`
			Count int    `json:"count"`
			RunID string `json:"run_id"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		types[rec.Type]++
		if rec.Type == "dropped" {
			dropped += rec.Count
			if rec.RunID == "" {
				t.Errorf("the dropped record names no run: %s", line)
			}
		}
	}
	// A token a second: one connection may pass after the burst.
	if types["network"] < 2 || types["network"]+dropped != 6 || dropped == 0 || types["run"] != 1 {
		t.Errorf("records %v, %d dropped: want the burst's network records, the rest dropped, and the run's\n%s", types, dropped, b)
	}
}
