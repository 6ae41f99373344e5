package daemon

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/moatbox/moat/policy"
)

// Template is a named policy the daemon's owner offers: a create request
// names it instead of sending a policy. What it sets is the owner's
// choice, so the confinement of a tenant's own policy (confine) does not
// apply to it; what the request adds (its workspace) is checked as ever.
type Template struct {
	Name string
	// Source is the file it was read from, named in its errors.
	Source string
	doc    []byte
	// Pool is how many sandboxes of it the daemon keeps made in advance
	// (see Manager's pool); zero means none.
	Pool int
}

// validTemplateName says whether name may be a template's: a file name
// without a leading dot or characters a URL or a shell would mangle.
func validTemplateName(name string) bool {
	if name == "" || len(name) > 64 || name[0] == '.' || name[0] == '-' {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// LoadTemplates reads every NAME.toml (or NAME.json) in dir as a template
// and checks it as a session's policy would be checked, so that a mistake
// stops the daemon at start, with every problem located (file:line:field),
// rather than every create request that names it.
func LoadTemplates(dir string) (map[string]*Template, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	out := map[string]*Template{}
	var errs []error
	for _, e := range ents {
		base, ext := e.Name(), filepath.Ext(e.Name())
		if ext != ".toml" && ext != ".json" || strings.HasPrefix(base, ".") {
			continue
		}
		name := strings.TrimSuffix(base, ext)
		path := filepath.Join(dir, base)
		if !validTemplateName(name) {
			errs = append(errs, fmt.Errorf("%s: a template's name is lower-case letters, digits, '.', '_' and '-'", path))
			continue
		}
		if out[name] != nil {
			errs = append(errs, fmt.Errorf("%s: template %q is defined twice (%s)", path, name, out[name].Source))
			continue
		}
		t, err := loadTemplate(name, path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[name] = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("templates: %s has no NAME.toml or NAME.json", dir)
	}
	return out, nil
}

func loadTemplate(name, path string) (*Template, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
		return nil, fmt.Errorf("%s: not a regular file of at most 1MiB", path)
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t := &Template{Name: name, Source: path, doc: doc}
	// Checked against a workspace that stands for the request's.
	if _, err := t.policy("/workspace", ""); err != nil {
		return nil, err
	}
	return t, nil
}

// policy is t's policy pointed at the workspace ws, in mode when set,
// resolved and validated.
func (t *Template) policy(ws, mode string) (*policy.Policy, error) {
	p, err := policy.ParseDocument(t.Source, t.doc)
	if err != nil {
		return nil, err
	}
	if p.Workspace.Path != policy.Default().Workspace.Path {
		return nil, &policy.Errors{p.FieldError("workspace.path", "a template leaves it out: the request's workspace is the session's")}
	}
	p.Workspace.Path = ws
	if mode != "" {
		p.Workspace.Mode = mode
	}
	if err := p.ResolveAndValidate(ws, ""); err != nil {
		return nil, err
	}
	return p, nil
}

// checkTemplateQuotas refuses templates that no create could use: under a
// tenant memory or CPU quota every session must set that limit, and a
// request that names a template sends no policy of its own to set it
// with (its warm pool would be made and never claimed).
func checkTemplateQuotas(cfg *Config) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.Templates)) {
		t := cfg.Templates[name]
		p, err := policy.ParseDocument(t.Source, t.doc)
		if err != nil {
			continue // refused at its use, with the error
		}
		if cfg.TenantMemory > 0 && p.Limits.Memory == 0 {
			return fmt.Errorf("template %s (%s): the daemon bounds each tenant's memory (--tenant-memory), so every session needs limits.memory, and a request naming the template cannot add it: set it in the template", name, t.Source)
		}
		if cfg.TenantCPUs > 0 && p.Limits.CPUs == 0 {
			return fmt.Errorf("template %s (%s): the daemon bounds each tenant's CPUs (--tenant-cpus), so every session needs limits.cpus, and a request naming the template cannot add it: set it in the template", name, t.Source)
		}
	}
	return nil
}

// Templates returns the names of the daemon's templates, sorted.
func (m *Manager) Templates() []string {
	var names []string
	for n := range m.cfg.Templates {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// requestPolicy is the policy a create request asks for, pointed at the
// workspace ws: its template's (ErrNotFound for an unknown one), or its
// own document, confined to what the tenant may ask for (tenantPolicy).
func (m *Manager) requestPolicy(t Tenant, req *CreateRequest, ws string) (p *policy.Policy, err error) {
	if req.Template == "" {
		p, err = tenantPolicy(t, req.Policy, req.PolicyFile, ws, req.WorkspaceMode, req.Checked)
	} else {
		var tpl *Template
		if tpl, err = m.template(req); err == nil {
			p, err = tpl.policy(ws, req.WorkspaceMode)
		}
	}
	if err == nil {
		err = m.checkSockets(p, ws)
	}
	return p, err
}

// template is the template req names; a request names a template or
// sends a policy, not both.
func (m *Manager) template(req *CreateRequest) (*Template, error) {
	if req.Policy != "" || req.Checked != nil {
		return nil, fmt.Errorf("%w: a request names a template or sends a policy, not both", ErrBadRequest)
	}
	tpl := m.cfg.Templates[req.Template]
	if tpl == nil {
		return nil, fmt.Errorf("%w: no template %q", ErrNoTemplate, req.Template)
	}
	return tpl, nil
}

// ErrNoTemplate: a create request names a template the daemon does not have.
var ErrNoTemplate = errors.New("unknown template")
