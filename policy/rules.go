package policy

import (
	"fmt"
	"path"
	"reflect"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"

	"github.com/moatbox/moat/internal/netrule"
)

// Rule is one [[rules]] entry: what it matches, and what the harness does
// with an action that matches it. Package harness evaluates the rules; this
// package only reads and checks them.
//
// A rule matches on exactly one kind of action, set in Match. Command rules
// (command, command_regex) decide command lines and the programs they
// start; host rules, the destinations of the egress proxy; write rules are
// read and validated now and used by a later part of the harness (file
// writes through the API).
type Rule struct {
	// Name identifies the rule in messages and the audit stream. Default
	// "rules[N]", its place in the file (0-based).
	Name string `toml:"name,omitempty" json:"name,omitempty"`
	// Match says which actions the rule is about. Required.
	Match Match `toml:"match" json:"match"`
	// Decision is what happens to a matching action. Required.
	//   allow  it runs (and the decision is audited)
	//   deny   it is refused, with Reason
	//   ask    a person approves it first; with nobody to ask, it is refused
	Decision string `toml:"decision" json:"decision"`
	// Reason is shown to the agent and to the person asked. Default "".
	Reason string `toml:"reason,omitempty" json:"reason,omitempty"`
	// ExamplesMatch lists command lines (each an argv, one simple command)
	// the rule must match; ExamplesNotMatch, command lines it must not.
	// They are checked by Validate, so a rule that does not do what its
	// author meant is an error naming the example. For a write rule each
	// example is one path, written "src/main.go" or ["src/main.go"]; host
	// rules take none. Default [].
	ExamplesMatch    [][]string `toml:"examples_match,omitempty" json:"examples_match,omitempty"`
	ExamplesNotMatch [][]string `toml:"examples_not_match,omitempty" json:"examples_not_match,omitempty"`
}

// Match is the condition of a Rule. Exactly one of Command, CommandRegex,
// Write and Host is set; Port, Method and Path refine Host.
//
// Commands are matched one simple command at a time (the harness splits a
// shell line into its simple commands), and the program is compared by its
// base name: /usr/bin/git is git.
type Match struct {
	// Command is an argv prefix: the rule matches a command whose first
	// len(Command) words match these, one for one. Each word is a glob
	// (path.Match syntax: "*", "?", "[...]"; in a glob without "/", they
	// match "/" as any other byte), so "-*" matches any option and "*"
	// any one word; a word has to be matched whole. The first word is a
	// program name without a directory. Default [].
	Command []string `toml:"command,omitempty" json:"command,omitempty"`
	// CommandRegex is a regular expression (Go RE2 syntax) matched against
	// the command's words joined by single spaces, the program by its base
	// name (see CommandWords: a space, tab, newline or other control byte
	// inside a word is written \xNN, so \S+ is always one word). It is not
	// anchored, as grep is not: write ^ and $ to anchor it.
	// Default "".
	CommandRegex string `toml:"command_regex,omitempty" json:"command_regex,omitempty"`
	// Write is a glob of paths relative to the workspace ("**" matches any
	// number of directories; see MatchWrite) that an API writes, makes or
	// removes (the daemon's files API, MCP's write_file and edit_file).
	// Its examples are paths ("src/main.go"). Default "".
	Write string `toml:"write,omitempty" json:"write,omitempty"`
	// Host is a network destination, "host" or "*.domain", in the grammar
	// of [network] deny entries (without a port: see Port), checked by the
	// egress proxy for what [network] allows. Default "".
	Host string `toml:"host,omitempty" json:"host,omitempty"`
	// Port narrows Host to one port. Default 0: any port.
	Port int `toml:"port,omitempty" json:"port,omitempty"`
	// Method narrows Host to one HTTP method (upper case), where the proxy
	// sees the request (plain HTTP); a tunnel, whose requests it cannot
	// see, matches a deny or ask rule narrowed so, never an allow rule.
	// Default "": any method.
	Method string `toml:"method,omitempty" json:"method,omitempty"`
	// Path narrows Host to request paths matching this glob (starting with
	// "/"), where the proxy sees the request. Default "": any path.
	Path string `toml:"path,omitempty" json:"path,omitempty"`
}

// Harness selects what the harness adds to a policy's own rules.
type Harness struct {
	// Builtin lists the built-in rule sets in force. Default
	// ["irreversible"]: ask before publishing, deploying, sending and
	// deleting outside the workspace (the README lists its rules). An empty
	// list turns them off. A policy's own rules that match a command decide
	// it before any built-in set is consulted.
	Builtin []string `toml:"builtin" json:"builtin"`
	// AskTimeout is how long an ask waits for a person's answer before it
	// counts as refused. Default 0: DefaultAskTimeout.
	AskTimeout Duration `toml:"ask_timeout" json:"ask_timeout,omitempty"`
}

// DefaultAskTimeout is how long an ask waits when Harness.AskTimeout is 0.
const DefaultAskTimeout = 5 * time.Minute

// AskWait is how long an ask of this policy waits for an answer.
func (h *Harness) AskWait() time.Duration {
	if h.AskTimeout > 0 {
		return time.Duration(h.AskTimeout)
	}
	return DefaultAskTimeout
}

// Rule decisions.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
	DecisionAsk   = "ask"
)

// BuiltinIrreversible is the name of the built-in rule set that asks about
// irreversible commands.
const BuiltinIrreversible = "irreversible"

// IsCommand reports whether the rule is about command lines.
func (m *Match) IsCommand() bool { return len(m.Command) > 0 || m.CommandRegex != "" }

// MatchCommand reports whether argv, one simple command, matches m's
// Command or CommandRegex. argv[0] is compared by its base name. An invalid
// pattern matches nothing (Validate reports it).
func (m *Match) MatchCommand(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	switch {
	case len(m.Command) > 0:
		if len(argv) < len(m.Command) {
			return false
		}
		for i, pat := range m.Command {
			w := argv[i]
			if i == 0 {
				w = path.Base(w)
			}
			if !wordMatch(pat, w) {
				return false
			}
		}
		return true
	case m.CommandRegex != "":
		re, err := regexp.Compile(m.CommandRegex)
		return err == nil && re.MatchString(CommandWords(argv))
	}
	return false
}

// MatchCommandSpellings reports whether argv matches m as MatchCommand
// does, or in another spelling of the same command (Spellings): with each
// of its paths clean (./secret/key, secret//key and x/../secret/key as
// secret/key; a glob with "/" of Command cleaned alike), and without the
// options its program reads before its command (git -C . push as git
// push). What a deny or an ask is about is refused however it is spelled.
// Not for an allow, whose cleaned path may name something else through a
// link (x/.. is not where x/ leads), and whose program's options may
// change what the command does (git -c alias.status=... status).
func (m *Match) MatchCommandSpellings(argv []string) bool {
	if m.MatchCommand(argv) {
		return true
	}
	pats := make([]string, len(m.Command))
	cleaned := false
	for i, p := range m.Command {
		pats[i] = cleanPathWord(p)
		cleaned = cleaned || pats[i] != p
	}
	cm := &Match{Command: pats}
	// A rule's own path globs cleaned (["cat", "./secret/*"]) are
	// compared with every spelling, argv's own too: a clean path is
	// its own cleaned spelling.
	if cleaned && cm.MatchCommand(argv) {
		return true
	}
	for _, sp := range Spellings(argv) {
		if m.MatchCommand(sp) || cleaned && cm.MatchCommand(sp) {
			return true
		}
	}
	return false
}

// Spellings returns the other spellings of argv, each a command line
// that runs the same command, that a deny or an ask also matches (MatchCommandSpellings): its paths cleaned, and each
// reading of it without its program's leading options (CommandsOf), with
// its paths cleaned too; none that are argv itself.
func Spellings(argv []string) [][]string {
	var out [][]string
	if clean, changed := cleanPaths(argv); changed {
		out = append(out, clean)
	}
	for _, short := range CommandsOf(argv) {
		out = append(out, short)
		if clean, changed := cleanPaths(short); changed {
			out = append(out, clean)
		}
	}
	return out
}

// A leadGrammar is how a program reads the options of its own that come
// before the command word a rule is about (git -C dir push, docker
// --context prod push, kubectl -n prod delete, make -C sub deploy).
type leadGrammar struct {
	// valued are the options that take their value in the next word
	// (a short one may end a group: make -sC dir); one ending in "#"
	// takes it only when it is a number (make -j 4, make -j deploy).
	// Any other word starting with "-" is one option on its own (-P,
	// --bare, --git-dir=x, -Cdir).
	valued []string
	// open: the program takes options it does not list (kubectl's and
	// helm's plugins, new releases): a long option not in valued or
	// flags may take the next word or not, and both readings are tried.
	open  bool
	flags []string // long options known to take no value, where open
	// targets: every word that is no option is a command (make's
	// targets: make all deploy), and NAME=value words are not (make
	// X=1 deploy).
	targets bool
}

// leads are the programs whose leading options a deny or an ask reads
// past. A valued option missing from a list only makes a rule match
// fewer spellings.
var leads = map[string]leadGrammar{
	"git":       {valued: []string{"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--attr-source", "--shallow-file"}},
	"docker":    {valued: []string{"-c", "--context", "-H", "--host", "-l", "--log-level", "--config", "--tlscacert", "--tlscert", "--tlskey"}},
	"kubectl":   {open: true, valued: []string{"-n", "--namespace", "--context", "--kubeconfig", "--kuberc", "--cluster", "--user", "-s", "--server", "--token", "--as", "--as-group", "--as-uid", "--certificate-authority", "--client-certificate", "--client-key", "--request-timeout", "--tls-server-name", "--cache-dir", "-v", "--v", "--profile", "--profile-output", "--log-file", "--log-dir", "--log-file-max-size", "--log-flush-frequency", "--log-backtrace-at", "--stderrthreshold", "--username", "--password", "--vmodule"}, flags: []string{"--insecure-skip-tls-verify", "--match-server-version", "--disable-compression", "--warnings-as-errors", "--add-dir-header", "--alsologtostderr", "--logtostderr", "--one-output", "--skip-headers", "--skip-log-headers"}},
	"helm":      {open: true, valued: []string{"-n", "--namespace", "--kube-context", "--kubeconfig", "--kube-apiserver", "--kube-as-user", "--kube-as-group", "--kube-ca-file", "--kube-token", "--kube-tls-server-name", "--registry-config", "--repository-cache", "--repository-config", "--burst-limit", "--qps", "--content-cache"}, flags: []string{"--debug", "--kube-insecure-skip-tls-verify"}},
	"make":      {targets: true, valued: []string{"-C", "--directory", "-f", "--file", "--makefile", "-I", "--include-dir", "-o", "--old-file", "--assume-old", "-W", "--what-if", "--new-file", "--assume-new", "-E", "--eval", "-j#", "--jobs#", "-l#", "--load-average#", "--max-load#"}},
	"cargo":     {valued: []string{"-C", "--color", "--config", "-Z"}},
	"npm":       {valued: []string{"-C", "--prefix", "-w", "--workspace", "--registry", "--userconfig", "--globalconfig", "--cache", "--loglevel", "--tag", "--otp", "--access"}},
	"terraform": {},
	"tofu":      {},
}

// CommandsOf returns the readings of argv without the options its
// program reads before its command (leads; cargo's +toolchain is one,
// and "--" ends them): argv[0] followed by the words from a command word
// on. There is one for most programs, one per target for make, and more
// where an option the program does not list may or may not take the next
// word; none for a program not in leads or a command word at once.
func CommandsOf(argv []string) [][]string {
	if len(argv) < 2 {
		return nil
	}
	prog := path.Base(argv[0])
	g, ok := leads[prog]
	if !ok {
		return nil
	}
	var out [][]string
	stop := func(i int) {
		if i > 1 && i < len(argv) {
			out = append(out, append([]string{argv[0]}, argv[i:]...))
		}
	}
	opts := true
	for i := 1; i < len(argv); {
		w := argv[i]
		switch {
		case opts && w == "--":
			opts = false
			i++
			continue
		case opts && len(w) > 1 && w[0] == '-', opts && prog == "cargo" && i == 1 && strings.HasPrefix(w, "+"):
			n, both := g.optionWords(w, argv[i+1:])
			if both {
				stop(i + 1) // the next word, if the option takes none
			}
			i += n
			continue
		case g.targets && strings.Contains(w, "=") && !strings.HasPrefix(w, "="):
			i++ // make's NAME=value
			continue
		}
		stop(i)
		if !g.targets {
			break
		}
		i++
	}
	return out
}

// optionWords says how many words the option w takes, itself included,
// with next the words after it; both says the program may read it either
// way (g.open): the next word is then counted as its value, and the
// caller also tries it as the command.
func (g *leadGrammar) optionWords(w string, next []string) (n int, both bool) {
	value := func(o string) int {
		if len(next) == 0 {
			return 1
		}
		if slices.Contains(g.valued, o) || slices.Contains(g.valued, o+"#") && isNumber(next[0]) {
			return 2
		}
		return 1
	}
	if strings.HasPrefix(w, "--") {
		switch {
		case strings.Contains(w, "="):
			return 1, false
		case slices.Contains(g.valued, w) || slices.Contains(g.valued, w+"#"):
			return value(w), false
		case g.open && !slices.Contains(g.flags, w) && len(next) > 0 && !strings.HasPrefix(next[0], "-"):
			return 2, true
		}
		return 1, false
	}
	if w[0] == '+' {
		return 1, false
	}
	// A group of short options (-sC dir): a letter that takes a value
	// takes the rest of the word, or the next word when it is the last.
	for k := 1; k < len(w); k++ {
		o := "-" + w[k:k+1]
		if slices.Contains(g.valued, o) || slices.Contains(g.valued, o+"#") {
			if k < len(w)-1 {
				return 1, false
			}
			return value(o), false
		}
	}
	return 1, false
}

func isNumber(w string) bool {
	if w == "" {
		return false
	}
	for _, c := range []byte(w) {
		if (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

// cleanPaths returns argv with each argument that is a path (holds "/"
// and is no option) cleaned (path.Clean), and whether any changed.
func cleanPaths(argv []string) ([]string, bool) {
	var out []string
	for i, w := range argv {
		if i == 0 {
			continue
		}
		if c := cleanPathWord(w); c != w {
			if out == nil {
				out = slices.Clone(argv)
			}
			out[i] = c
		}
	}
	if out == nil {
		return argv, false
	}
	return out, true
}

func cleanPathWord(w string) string {
	if !strings.Contains(w, "/") || strings.HasPrefix(w, "-") {
		return w
	}
	return path.Clean(w)
}

// wordMatch matches a word of a command line against a glob of
// Match.Command. A glob without "/" is about words: its "*" and "?" match
// a "/" too, so that "*" is any word (["source", "*"] matched no
// ./evil.sh, and "-*" no --file=/x, found by a tester). A glob with "/"
// is a path's, whose "*" stays within one element: an allow of
// ["python", "tests/*"] must not take tests/../../tmp/x.py.
func wordMatch(pat, w string) bool {
	if !strings.Contains(pat, "/") {
		// path.Match, which stops them at "/", is given both with "/"
		// as a byte no argument holds.
		w = strings.ReplaceAll(w, "/", "\x00")
	}
	ok, err := path.Match(pat, w)
	return err == nil && ok
}

// CommandWords is what a CommandRegex is matched against: the words of
// argv joined by single spaces, the program by its base name. Inside a
// word, every space and control byte (below 0x20, and 0x7f) is written
// \xNN (two lower-case hex digits): the only raw spaces are then the ones
// between words and there is no raw newline, so a word holding a space or
// a newline cannot pass for two words, nor hide the words after it from a
// pattern (`git -c $'x.y=a\nb' push` is "git -c x.y=a\x0ab push").
func CommandWords(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	var b strings.Builder
	for i, w := range argv {
		if i == 0 {
			w = path.Base(w)
		} else {
			b.WriteByte(' ')
		}
		escapeWord(&b, w)
	}
	return b.String()
}

// escapeWord writes w to b with its spaces and control bytes escaped (see
// CommandWords).
func escapeWord(b *strings.Builder, w string) {
	const hex = "0123456789abcdef"
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c <= ' ' || c == 0x7f {
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
}

// RuleName returns the name of the i'th rule: its Name, or "rules[i]".
func (p *Policy) RuleName(i int) string {
	if n := p.Rules[i].Name; n != "" {
		return n
	}
	return indexKey("rules", i)
}

// RuleLine returns the line of Source the i'th rule starts on, 0 if unknown.
func (p *Policy) RuleLine(i int) int { return p.lines[indexKey("rules", i)] }

func (p *Policy) validateRules(l *errorList) {
	if p.Harness.AskTimeout < 0 {
		l.add("harness.ask_timeout", "must not be negative")
	}
	for _, b := range p.Harness.Builtin {
		if b != BuiltinIrreversible {
			l.add("harness.builtin", fmt.Sprintf("unknown built-in rule set %q (the sets are: %s)", b, BuiltinIrreversible))
		}
	}
	names := map[string]int{}
	for i := range p.Rules {
		r := &p.Rules[i]
		key := indexKey("rules", i)
		// A name and a reason are shown to the person asked, on a
		// terminal: a control character in them (an escape sequence, a
		// carriage return) could rewrite the lines around them, the
		// command asked about included.
		if i := strings.IndexFunc(r.Name, isControl); i >= 0 {
			l.add(key+".name", fmt.Sprintf("%q holds a control or invisible character (%U): names are shown to the person asked", r.Name, []rune(r.Name[i:])[0]))
		}
		if i := strings.IndexFunc(r.Reason, isControl); i >= 0 {
			l.add(key+".reason", fmt.Sprintf("%q holds a control or invisible character (%U): reasons are shown to the person asked, on one line", r.Reason, []rune(r.Reason[i:])[0]))
		}
		if r.Name != "" {
			if j, dup := names[r.Name]; dup {
				l.add(key+".name", fmt.Sprintf("%q is also the name of rules[%d]", r.Name, j))
			}
			names[r.Name] = i
		}
		if r.Decision == "" {
			l.add(key+".decision", "missing: say what the rule decides: allow, deny or ask")
		} else {
			oneOf(l, key+".decision", r.Decision, DecisionAllow, DecisionDeny, DecisionAsk)
		}
		valid := validateMatch(l, key+".match", &r.Match)
		switch {
		case valid && r.Match.IsCommand():
			checkExamples(l, key, r)
		case valid && r.Match.Write != "":
			checkWriteExamples(l, key, r)
		case r.Match.Host != "" && len(r.ExamplesMatch)+len(r.ExamplesNotMatch) > 0:
			l.add(key+".examples_match", "examples are command lines or paths; they apply to command, command_regex and write rules only")
		}
	}
}

// isControl says whether r would change how the text around it shows on
// a terminal rather than show itself: a control character (C0, DEL, C1:
// unicode.IsControl, which this package does without importing unicode,
// see TestImports), or an invisible format or direction character (zero
// widths, the bidirectional marks, overrides and isolates, the line and
// paragraph separators, the byte order mark).
func isControl(r rune) bool {
	switch {
	case r < 0x20 || r >= 0x7f && r < 0xa0:
		return true
	case r == 0x061c || r == 0x180e || r == 0xfeff:
		return true
	case r >= 0x200b && r <= 0x200f, r >= 0x2028 && r <= 0x202e, r >= 0x2060 && r <= 0x2069:
		return true
	}
	return false
}

// validateMatch checks m and reports whether its patterns can be used.
func validateMatch(l *errorList, key string, m *Match) bool {
	kinds := 0
	for _, set := range []bool{len(m.Command) > 0, m.CommandRegex != "", m.Write != "", m.Host != ""} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		l.add(key, "set exactly one of command, command_regex, write and host")
		return false
	}
	ok := true
	bad := func(field, msg string) { l.add(key+"."+field, msg); ok = false }
	for i, w := range m.Command {
		f := indexKey("command", i)
		if w == "" {
			bad(f, "must not be empty")
		} else if _, err := path.Match(w, ""); err != nil {
			bad(f, fmt.Sprintf("%q is not a valid glob", w))
		} else if i == 0 && strings.Contains(w, "/") {
			bad(f, fmt.Sprintf("%q: programs are matched by their base name (/usr/bin/git is git); write %q", w, path.Base(w)))
		}
	}
	if m.CommandRegex != "" {
		if _, err := regexp.Compile(m.CommandRegex); err != nil {
			bad("command_regex", err.Error())
		} else if programPath(m.CommandRegex) {
			bad("command_regex", fmt.Sprintf("%q can never match: the program is matched by its base name (/usr/bin/git is git), which has no /; begin with the name (^git), or with ^(/usr/bin/)? to allow both", m.CommandRegex))
		}
	}
	if m.Write != "" {
		if err := validWrite(m.Write); err != nil {
			bad("write", err.Error())
		}
	}
	if m.Host == "" {
		if m.Port != 0 || m.Method != "" || m.Path != "" {
			bad("host", "port, method and path narrow a host rule; set host")
		}
		return ok
	}
	// The grammar of [network] deny entries, which the proxy will match
	// these against.
	if h, err := netrule.ParseHost(m.Host, false); err != nil {
		bad("host", fmt.Sprintf("%q: %v", m.Host, err))
	} else if h.Port != 0 {
		bad("host", fmt.Sprintf("%q: write the port in port", m.Host))
	}
	if m.Port < 0 || m.Port > 65535 {
		bad("port", fmt.Sprintf("%d is not a port (1-65535; 0 or absent means any)", m.Port))
	}
	if m.Method != "" && !regexp.MustCompile(`^[A-Z]+$`).MatchString(m.Method) {
		bad("method", fmt.Sprintf("%q is not an HTTP method in upper case (GET, POST, ...)", m.Method))
	}
	if m.Path != "" && !strings.HasPrefix(m.Path, "/") {
		bad("path", fmt.Sprintf("%q: a request path starts with /", m.Path))
	}
	return ok
}

// checkExamples reports every example r gets wrong.
func checkExamples(l *errorList, key string, r *Rule) {
	for _, ex := range []struct {
		field string
		list  [][]string
		want  bool
	}{{"examples_match", r.ExamplesMatch, true}, {"examples_not_match", r.ExamplesNotMatch, false}} {
		for i, argv := range ex.list {
			f := indexKey(key+"."+ex.field, i)
			switch {
			case len(argv) == 0:
				l.add(f, "an example is a command line: a non-empty list of words")
			case len(argv) == 1 && strings.ContainsAny(argv[0], " \t"):
				l.add(f, fmt.Sprintf("an example is a command line, a list of words: %q, not %q", strings.Fields(argv[0]), argv[0]))
			case r.matchExample(argv) != ex.want:
				verb := "does not match"
				if !ex.want {
					verb = "matches"
				}
				l.add(f, fmt.Sprintf("the rule %s its own example %q", verb, argv))
			}
		}
	}
}

// matchExample matches an example as the rule will match a command:
// a deny or an ask in every spelling (MatchCommandSpellings).
func (r *Rule) matchExample(argv []string) bool {
	if r.Decision == DecisionAllow {
		return r.Match.MatchCommand(argv)
	}
	return r.Match.MatchCommandSpellings(argv)
}

var (
	rulesType    = reflect.TypeFor[[]Rule]()
	argvListType = reflect.TypeFor[[][]string]()
)

// tables decodes an array of tables ([[rules]], [[secrets]]) into the
// slice dst, one struct per table.
func (d *decoder) tables(key string, v any, dst reflect.Value) {
	a, ok := v.([]any)
	if !ok {
		d.add(key, "expected an array of tables ([["+key+"]]), got "+describe(v))
		return
	}
	list := reflect.MakeSlice(dst.Type(), len(a), len(a))
	for i, e := range a {
		t, ok := e.(map[string]any)
		if !ok {
			d.add(indexKey(key, i), "expected a table, got "+describe(e))
			continue
		}
		d.table(indexKey(key, i), t, list.Index(i))
	}
	dst.Set(list)
}

// argvList decodes an array of arrays of strings.
func (d *decoder) argvList(key string, v any, dst reflect.Value) {
	a, ok := v.([]any)
	if !ok {
		d.add(key, `expected an array of command lines (e.g. [["git", "push"]]), got `+describe(v))
		return
	}
	list := make([][]string, len(a))
	for i, e := range a {
		if p, ok := e.(string); ok {
			// A write rule's example is one path.
			list[i] = []string{p}
			continue
		}
		// The TOML parser gives an inner array no position of its own, so
		// keyLines placed it on the line of the outer one: an example is
		// on the line of its first word.
		k := indexKey(key, i)
		if line, ok := d.p.lines[indexKey(k, 0)]; ok {
			d.p.lines[k] = line
		}
		d.value(k, e, reflect.ValueOf(&list[i]).Elem())
	}
	dst.Set(reflect.ValueOf(list))
}

// programPath reports whether the regular expression re needs the words
// it matches to begin with "/": the program's, which CommandWords gives
// by its base name, never can.
func programPath(re string) bool {
	r, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return false
	}
	r = r.Simplify()
	if r.Op != syntax.OpConcat || len(r.Sub) < 2 || r.Sub[0].Op != syntax.OpBeginText {
		return false
	}
	lit := r.Sub[1]
	return lit.Op == syntax.OpLiteral && len(lit.Rune) > 0 && lit.Rune[0] == '/'
}
