package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moatbox/moat/internal/inputfile"
)

// A workspace's .moat.toml is policy that the sandboxed command itself may
// have written (in direct mode it can create one where there was none), and
// the next run there would obey it. So, like direnv's `allow`, such a file is
// used only once a person has trusted that exact content, and the trust
// covers every file the policy loads: a trusted policy naming a seccomp
// profile inside the workspace would otherwise let the command weaken the
// profile and keep the policy's trust. A policy a person names directly (the
// CLI's --policy) is their own choice and needs no trust; callers load it
// with Load.

// Trust is the set of policy files a person has trusted: for each (by
// absolute path) the SHA-256 of its content and of every file it loads. The
// zero value trusts nothing. Trust is plain data: ReadTrust reads it, and the
// caller stores it again, encoded with json.Marshal, after Add.
type Trust struct {
	records map[string]TrustRecord
}

// TrustRecord is what trusting one policy file recorded.
type TrustRecord struct {
	// SHA256 is the hex SHA-256 of the policy file.
	SHA256 string `json:"sha256"`
	// Files maps each file the policy loads (absolute, as Resolve makes
	// it) to its hex SHA-256. Nil in a record written before moat hashed
	// them: such a record trusts only a policy that loads no file.
	Files map[string]string `json:"files,omitempty"`
}

// Why a policy file is not trusted (UntrustedError.Reason).
const (
	// TrustNew: the policy file was never trusted.
	TrustNew = "new"
	// TrustChanged: the policy file, or a file it loads, changed since.
	TrustChanged = "changed"
	// TrustIncomplete: the record does not cover a file the policy loads
	// (trusted by an earlier moat that did not hash them).
	TrustIncomplete = "incomplete"
)

// UntrustedError is Trust.Load's refusal of a policy file whose content, or
// the content of a file it loads, a person has not trusted.
type UntrustedError struct {
	Policy string // the policy file, absolute
	File   string // the file that is new, changed or not covered: Policy or a file it loads
	Field  string // the field naming File ("syscalls.profile"); "" when File is Policy
	Reason string // TrustNew, TrustChanged or TrustIncomplete
}

func (e *UntrustedError) Error() string {
	const could = "a command run in this workspace could have"
	switch {
	case e.Reason == TrustNew:
		return fmt.Sprintf("%s is not trusted yet (%s written it)", e.Policy, could)
	case e.Reason == TrustIncomplete:
		return fmt.Sprintf("%s loads %s (%s), which its trust does not cover (it was trusted by an earlier moat that did not record the files a policy loads)", e.Policy, e.File, e.Field)
	case e.File != e.Policy:
		return fmt.Sprintf("%s, which the trusted policy %s loads (%s), changed since you trusted it (%s changed it)", e.File, e.Policy, e.Field, could)
	}
	return fmt.Sprintf("%s changed since you trusted it (%s changed it)", e.Policy, could)
}

// ReadTrust reads a Trust stored at path; a missing file trusts nothing.
// It accepts the earlier format, in which each policy's record was its
// SHA-256 alone.
func ReadTrust(path string) (*Trust, error) {
	b, err := inputfile.Read(path, "trust file", inputfile.MaxTrust)
	if errors.Is(err, fs.ErrNotExist) {
		return &Trust{}, nil
	}
	if err != nil {
		return nil, err
	}
	t := &Trust{}
	if err := json.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// UnmarshalJSON reads {"/path/.moat.toml": {"sha256": ..., "files": {...}}},
// and the earlier {"/path/.moat.toml": "<sha256>"}.
func (t *Trust) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	t.records = make(map[string]TrustRecord, len(raw))
	for path, v := range raw {
		var r TrustRecord
		if bytes.HasPrefix(bytes.TrimSpace(v), []byte(`"`)) {
			if err := json.Unmarshal(v, &r.SHA256); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		} else if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		t.records[path] = r
	}
	return nil
}

// MarshalJSON writes the current format; records read in the earlier one
// are written as records without Files, which they are.
func (t *Trust) MarshalJSON() ([]byte, error) {
	if t.records == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(t.records)
}

// Record returns what was trusted for the policy file at path (absolute).
func (t *Trust) Record(path string) (TrustRecord, bool) {
	r, ok := t.records[path]
	return r, ok
}

// Load reads the policy file at path (absolute) as Load does, and returns it
// only if its content and that of every file it loads are what t trusted;
// otherwise the error is an *UntrustedError, or the error reading or parsing
// a file. home expands "~/" as in Resolve. Each file is read once: the
// returned policy hands the checked bytes to whoever reads the file through
// Policy.ReadFile, so a file rewritten after the check is not used.
func (t *Trust) Load(path, home string) (*Policy, error) {
	p, digest, files, err := loadHashed(path, home)
	if err != nil {
		return nil, err
	}
	r, ok := t.records[path]
	switch {
	case !ok:
		return nil, &UntrustedError{Policy: path, File: path, Reason: TrustNew}
	case r.SHA256 != digest:
		return nil, &UntrustedError{Policy: path, File: path, Reason: TrustChanged}
	}
	for _, f := range files {
		want, ok := r.Files[f.path]
		switch {
		case !ok && f.optional:
			// A file that was not there: one a program may now run.
			return nil, &UntrustedError{Policy: path, File: f.path, Field: f.field, Reason: TrustChanged}
		case !ok:
			return nil, &UntrustedError{Policy: path, File: f.path, Field: f.field, Reason: TrustIncomplete}
		case want != f.digest:
			return nil, &UntrustedError{Policy: path, File: f.path, Field: f.field, Reason: TrustChanged}
		}
	}
	// A file trusted with the policy and no longer among what it loads
	// or runs (an argument's file removed, or made something moat does
	// not hash) has changed too: never run without its check.
	for recorded := range r.Files {
		if !slices.ContainsFunc(files, func(f loadedFile) bool { return f.path == recorded }) {
			return nil, &UntrustedError{Policy: path, File: recorded, Reason: TrustChanged}
		}
	}
	return p, nil
}

// programDigest hashes a program or a file a program is given; "" for an
// argument that is no file: a word the program takes. One moat cannot
// hash (too large, unreadable, a FIFO) is an error: it could be the file
// the program reads.
func programDigest(ref loadedFile) (string, error) {
	d, err := inputfile.Digest(ref.path, "program", inputfile.MaxProgram)
	if err != nil && ref.optional && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, inputfile.ErrDirectory)) {
		return "", nil
	}
	return d, err
}

// VerifyPrograms checks, for a policy Trust.Load returned, that the
// programs it runs on the host and the files they are given are still
// what was checked, just before moat runs one: the trust was checked when
// the policy was loaded, and a revoke runs when the run or session ends,
// long after. It returns an *UntrustedError (TrustChanged) naming the
// first that changed; nil for a policy that was not checked.
//
// It narrows the time between the check and the use; it does not close
// it: an ELF program, and sandbox.runsc whatever it is, runs from a copy
// of the bytes checked against CheckedDigest, but a secret's script's
// interpreter reads the script by path, and a program the files its
// arguments name, after this check.
func (p *Policy) VerifyPrograms() error {
	paths := make([]string, 0, len(p.programs))
	for path := range p.programs {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	for _, path := range paths {
		d, err := programDigest(loadedFile{path: path, optional: true})
		if err != nil || d != p.programs[path] {
			return &UntrustedError{Policy: p.Source, File: path, Field: p.programField(path), Reason: TrustChanged}
		}
	}
	return nil
}

// CheckedDigest returns the digest Trust.Load checked for the program or
// argument file at path (absolute, as the policy names it), and whether
// it checked one: the bytes a caller may run in the file's place.
func (p *Policy) CheckedDigest(path string) (string, bool) {
	d, ok := p.programs[path]
	return d, ok && d != ""
}

// KeepChecks gives p, parsed again from the document Trust.Load checked
// for q (a daemon in the same process parses the text it is handed),
// what that check took: the digests of the programs the policy runs on
// the host (VerifyPrograms, CheckedDigest) and the content of the files
// it loads (ReadFile). Without them p's programs would run unchecked. It
// refuses, with ErrNotChecked, unless p came from q's file with the
// bytes q was checked with: the check is of that document only.
func (p *Policy) KeepChecks(q *Policy, doc []byte) error {
	checked, ok := q.loaded[q.Source]
	if q.programs == nil || !ok || p.Source != q.Source || !bytes.Equal(checked, doc) {
		return fmt.Errorf("%w: %s", ErrNotChecked, p.Source)
	}
	p.loaded = maps.Clone(q.loaded)
	p.programs = maps.Clone(q.programs)
	return nil
}

// ErrNotChecked: KeepChecks was given a policy other than the one the
// document was checked as.
var ErrNotChecked = errors.New("the policy is not the one its trust check read")

// programField is the field that names path among the programs the
// policy runs, for an error.
func (p *Policy) programField(path string) string {
	refs, _ := p.loads("")
	for _, r := range refs {
		if r.path == path {
			return r.field
		}
	}
	return ""
}

// Add trusts the policy file at path (absolute) as it is now, with the files
// it loads, and returns the record. The policy must parse and validate: a
// file that would not load is not worth trusting.
func (t *Trust) Add(path, home string) (TrustRecord, error) {
	p, digest, files, err := loadHashed(path, home)
	if err != nil {
		return TrustRecord{}, err
	}
	if err := p.Validate(); err != nil {
		return TrustRecord{}, err
	}
	r := TrustRecord{SHA256: digest}
	for _, f := range files {
		if r.Files == nil {
			r.Files = map[string]string{}
		}
		r.Files[f.path] = f.digest
	}
	if t.records == nil {
		t.records = map[string]TrustRecord{}
	}
	t.records[path] = r
	return r, nil
}

// loadedFile is a file a policy loads, read and hashed.
type loadedFile struct {
	field, path, digest string
	// program: a program moat runs on the host, hashed but not kept
	// (only its digest is: see CheckedDigest).
	program bool
	// optional: an argument of a program, covered only when it names a
	// regular file.
	optional bool
}

// at is "FILE:LINE" of field in p's document at path, as a FieldError
// names it ("FILE" where its line is unknown).
func (p *Policy) at(path, field string) string {
	if line := p.lineOf(field); line > 0 {
		return fmt.Sprintf("%s:%d", path, line)
	}
	return path
}

// loadHashed parses the policy file at path and reads every file it loads,
// keeping their content in the policy (see ReadFile), and returns the
// digests of all.
func loadHashed(path, home string) (*Policy, string, []loadedFile, error) {
	if !filepath.IsAbs(path) {
		return nil, "", nil, fmt.Errorf("policy file %q is not absolute", path)
	}
	data, err := readPolicy(path)
	if err != nil {
		return nil, "", nil, err
	}
	p, err := Parse(path, data)
	if err != nil {
		return nil, "", nil, err
	}
	// The document itself, for a caller that hands it on (ReadFile).
	p.loaded = map[string][]byte{path: data}
	refs, err := p.loads(home)
	if err != nil {
		return nil, "", nil, err
	}
	var files []loadedFile
	p.programs = map[string]string{}
	for _, ref := range refs {
		if ref.program {
			d, err := programDigest(ref)
			if err != nil {
				return nil, "", nil, fmt.Errorf("%s: %s: %w", p.at(path, ref.field), ref.field, err)
			}
			p.programs[ref.path] = d
			if d != "" {
				files = append(files, loadedFile{field: ref.field, path: ref.path, digest: d, program: true, optional: ref.optional})
			}
			continue
		}
		b, err := readLoaded(ref.path)
		if err != nil {
			return nil, "", nil, fmt.Errorf("%s: %s: %w", p.at(path, ref.field), ref.field, err)
		}
		p.loaded[ref.path] = b
		files = append(files, loadedFile{field: ref.field, path: ref.path, digest: digestOf(b)})
	}
	return p, digestOf(data), files, nil
}

// loads returns the files a policy parsed from an absolute Source reads when
// it runs, resolved as Resolve resolves them, and the programs it runs on
// the host by path: a secret's source and revoke (as the sandbox starts
// them, relative to SecretDir) and sandbox.runsc. A program a trusted
// policy names in the workspace is as much the command's to rewrite as a
// profile there, and moat would run the rewrite on the host, outside any
// sandbox. A program found on PATH is the host's and is not hashed. Only
// fields whose file moat reads or runs belong here; the filesystem lists
// are mounted, and what the command does with them is the sandbox's
// business.
func (p *Policy) loads(home string) ([]loadedFile, error) {
	var refs []loadedFile
	if prof := p.Syscalls.Profile; isProfilePath(prof) {
		if prof == "~" || strings.HasPrefix(prof, "~/") {
			if !filepath.IsAbs(home) {
				return nil, p.FieldError("syscalls.profile", fmt.Sprintf("%q needs the home directory, which is unknown", prof))
			}
			prof = filepath.Join(home, strings.TrimPrefix(prof, "~"))
		}
		if !filepath.IsAbs(prof) {
			prof = filepath.Join(filepath.Dir(p.Source), prof)
		}
		refs = append(refs, loadedFile{field: "syscalls.profile", path: filepath.Clean(prof)})
	}
	inDir := func(name string) string {
		// With no directory (a policy sent to the daemon) a relative name
		// stays relative: it is refused as a program (CheckSecretDir),
		// and as a word the program takes it names nothing moat knows.
		if dir := p.SecretDir(""); !filepath.IsAbs(name) && dir != "" {
			name = filepath.Join(dir, name)
		}
		return filepath.Clean(name)
	}
	program := func(field, words string) {
		argv := strings.Fields(words)
		if len(argv) == 0 {
			return
		}
		// As exec.Command takes it: a name without a slash is looked up
		// on PATH, one with a slash is relative to the command's Dir.
		if strings.Contains(argv[0], "/") {
			refs = append(refs, loadedFile{field: field, path: inDir(argv[0]), program: true})
		}
		// An argument that names a file there is, as often as not, what
		// the program runs ("python3 mint.py", "sh ./mint.sh"): it is
		// covered too, when it is a file.
		for _, a := range argv[1:] {
			if !strings.HasPrefix(a, "-") {
				refs = append(refs, loadedFile{field: field, path: inDir(a), program: true, optional: true})
			}
		}
	}
	for i, s := range p.Secrets {
		key := indexKey("secrets", i)
		if rest, ok := strings.CutPrefix(s.Source, "command:"); ok {
			program(key+".source", rest)
			program(key+".revoke", s.Revoke)
		}
	}
	if r := p.Sandbox.Runsc; filepath.IsAbs(r) {
		// A path, not words (Validate wants it absolute).
		refs = append(refs, loadedFile{field: "sandbox.runsc", path: filepath.Clean(r), program: true})
	}
	return refs, nil
}

// HostFiles returns the files that decide what the policy does, absolute:
// the policy file it was read from (resolved against cwd when relative)
// and those it loads or runs by path, as Trust covers them. A command
// that could rewrite one would choose the next run's policy; the sandbox
// keeps those in the places it writes read-only. A policy that came from
// no file (the built-in one, one sent to the daemon) has no file of its
// own, but the profile and programs it names by absolute path are as
// much the host's.
func (p *Policy) HostFiles(cwd, home string) []string {
	q := *p
	var files []string
	if src := p.Source; src != "" && (filepath.IsAbs(src) || filepath.IsAbs(cwd)) {
		if !filepath.IsAbs(src) {
			src = filepath.Join(cwd, src)
		}
		q.Source = filepath.Clean(src)
		files = append(files, q.Source)
	}
	refs, _ := q.loads(home)
	for _, r := range refs {
		if filepath.IsAbs(r.path) {
			files = append(files, r.path)
		}
	}
	return files
}

// ReadFile returns the content of a file the policy loads, such as a
// seccomp profile, or of the policy file itself: the bytes Trust.Load
// checked when the policy came from it, else the file as it is now.
func (p *Policy) ReadFile(path string) ([]byte, error) {
	if b, ok := p.loaded[path]; ok {
		return b, nil
	}
	return readLoaded(path)
}

// readPolicy and readLoaded read a policy file and a file a policy loads
// (today only a seccomp profile) as regular files of bounded size: a named
// pipe or /dev/zero in their place must not hang moat or fill its memory.
// ReadDocument reads a policy file as Load does, without parsing it: a
// regular file of bounded size (a named pipe is refused, not waited on).
func ReadDocument(path string) ([]byte, error) { return readPolicy(path) }

func readPolicy(path string) ([]byte, error) {
	return inputfile.Read(path, "policy file", inputfile.MaxPolicy)
}

func readLoaded(path string) ([]byte, error) {
	return inputfile.Read(path, "seccomp profile", inputfile.MaxProfile)
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
