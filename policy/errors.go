package policy

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/moatbox/moat/internal/inputfile"
)

// A policy's errors are read by a person, and a policy may come from
// someone else (a workspace's .moat.toml, a daemon tenant's request): one
// written to flood, with thousands of bad entries or a value of a
// megabyte quoted back, must not flood the terminal or the API's answer.
// So a list keeps its first MaxErrors problems and counts the rest, and a
// message quotes at most maxErrorMsg bytes.
const (
	MaxErrors   = 100
	maxErrorMsg = 1024
)

// FieldError is one problem with one field of a policy, located where the
// user can fix it: a line of the policy file or a command-line flag.
type FieldError struct {
	File  string // policy file, or "" for flags and the built-in policy
	Line  int    // 1-based line in File, 0 if unknown
	Field string // dotted, e.g. "limits.memory", "filesystem.read_only[2]"; "" for syntax errors
	Flag  string // the flag that set the value, e.g. "--memory"
	Msg   string
	// Err, if set, is the error Msg says (FieldErr): Unwrap returns it.
	Err error
}

// Unwrap returns the error the FieldError was made of, if any.
func (e *FieldError) Unwrap() error { return e.Err }

// Error returns "FILE:LINE: FIELD: MSG", "flag --memory: limits.memory: MSG"
// or "FIELD: MSG", leaving out the parts that are unknown.
func (e *FieldError) Error() string {
	var b strings.Builder
	switch {
	case e.Flag != "":
		b.WriteString("flag " + e.Flag + ": ")
	case e.File != "" && e.Line > 0:
		b.WriteString(inputfile.Shown(e.File) + ":" + strconv.Itoa(e.Line) + ": ")
	case e.File != "":
		b.WriteString(inputfile.Shown(e.File) + ": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a policy, in file order for parse errors
// and in field order for validation errors. Parse, Load, Validate and Resolve
// return it as *Errors.
type Errors []*FieldError

// Error returns one FieldError per line.
func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, fe := range e {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the FieldErrors, so errors.As finds a *FieldError.
func (e Errors) Unwrap() []error {
	errs := make([]error, len(e))
	for i, fe := range e {
		errs[i] = fe
	}
	return errs
}

// errorList collects FieldErrors located by the policy's origins.
type errorList struct {
	p    *Policy
	errs Errors
}

// add records msg about field, located at the flag or file line the field's
// value came from.
func (l *errorList) add(field, msg string) {
	fe := &FieldError{Field: field, Msg: clip(msg)}
	if flag, ok := l.p.flagFor(field); ok {
		fe.Flag = flag
	} else if l.p.Source != "" {
		fe.File = l.p.Source
		fe.Line = l.p.lineOf(field)
	}
	l.errs = append(l.errs, fe)
}

// FieldError makes an error about field located the way Validate's are:
// by the flag that set it, or by its file and line. Checks that need more
// than this package knows (the network rules, say) use it so their errors
// read like every other policy error.
func (p *Policy) FieldError(field, msg string) *FieldError {
	l := &errorList{p: p}
	l.add(field, msg)
	return l.errs[0]
}

// FieldErr returns err, an error about field found when the policy is
// used (a secret's source, the workspace), located as Validate's errors
// are when the field's value came from a file or a flag; else err as it
// is. errors.Is and errors.As see through it.
func (p *Policy) FieldErr(field string, err error) error {
	fe := p.FieldError(field, err.Error())
	if fe.File == "" && fe.Flag == "" {
		return err
	}
	fe.Msg, fe.Err = err.Error(), err // unclipped: moat's own words
	return fe
}

// err returns the collected errors as *Errors (BoundErrors), or nil if
// there are none.
func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return BoundErrors(l.errs)
}

// BoundErrors returns errs with at most MaxErrors problems: past that,
// the first MaxErrors and one more saying how many were left out, in the
// file of the first. Checks outside this package that list a policy's
// problems return their list through it.
func BoundErrors(errs Errors) *Errors {
	// In the order a person fixes them: down the file (a flag's first,
	// those without a line last).
	errs = slices.Clone(errs)
	slices.SortStableFunc(errs, func(a, b *FieldError) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		line := func(e *FieldError) int {
			if e.Line == 0 {
				return math.MaxInt
			}
			return e.Line
		}
		la, lb := line(a), line(b)
		switch {
		case la < lb:
			return -1
		case la > lb:
			return 1
		}
		return 0
	})
	if len(errs) <= MaxErrors {
		return &errs
	}
	more := len(errs) - MaxErrors
	kept := append(Errors{}, errs[:MaxErrors]...)
	kept = append(kept, &FieldError{File: errs[0].File, Msg: "and " + strconv.Itoa(more) + " more problems, not shown: fix these first"})
	return &kept
}

// clip shortens msg to maxErrorMsg bytes, on a character boundary.
func clip(msg string) string {
	if len(msg) <= maxErrorMsg {
		return msg
	}
	cut := maxErrorMsg
	for cut > 0 && msg[cut]&0xC0 == 0x80 { // a UTF-8 continuation byte
		cut--
	}
	return msg[:cut] + "… (cut)"
}

// flagFor returns the flag that set field or the field containing it.
func (p *Policy) flagFor(field string) (string, bool) {
	for f := field; f != ""; f = parentField(f) {
		if flag, ok := p.flags[f]; ok {
			return flag, true
		}
	}
	return "", false
}

// lineOf returns the line field was written on, or the line of the list or
// table holding it; 0 when the field did not come from the file. It does not
// climb above a section's fields ("limits.memory" never falls back to the
// [limits] header), so a default value is never blamed on the file.
func (p *Policy) lineOf(field string) int {
	// A field an element of an array of tables leaves out is located at
	// that element ([[rules]] for a rule without a decision).
	for f := field; ; {
		if line, ok := p.lines[f]; ok {
			return line
		}
		parent := parentField(f)
		if parent == "" || !strings.Contains(parent, ".") && !strings.HasSuffix(parent, "]") {
			return 0
		}
		f = parent
	}
}

// parentField returns the field containing f: "a.b[2]" -> "a.b",
// "a.b.c" -> "a.b", "a" -> "". Quoted parts are respected.
func parentField(f string) string {
	if strings.HasSuffix(f, "]") {
		if i := strings.LastIndexByte(f, '['); i > 0 {
			return f[:i]
		}
	}
	inQuote := false
	last := -1
	for i := 0; i < len(f); i++ {
		switch {
		case f[i] == '\\' && inQuote:
			i++
		case f[i] == '"':
			inQuote = !inQuote
		case f[i] == '.' && !inQuote:
			last = i
		}
	}
	if last < 0 {
		return ""
	}
	return f[:last]
}

// joinKey appends one key part to a dotted key, quoting it when it is not
// a bare TOML key.
func joinKey(prefix, part string) string {
	if !isBareKey(part) {
		part = strconv.Quote(part)
	}
	if prefix == "" {
		return part
	}
	return prefix + "." + part
}

func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func indexKey(prefix string, i int) string {
	return prefix + "[" + strconv.Itoa(i) + "]"
}
