//go:build linux

package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestStateDir(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", "")
	t.Setenv("XDG_STATE_HOME", "/x/state")
	t.Setenv("HOME", "/home/u")
	want := "/x/state/moat"
	if os.Geteuid() == 0 {
		want = "/var/lib/moat"
	}
	if d, err := StateDir(); err != nil || d != want {
		t.Errorf("StateDir() = %q, %v; want %q", d, err, want)
	}
	if os.Geteuid() != 0 {
		t.Setenv("XDG_STATE_HOME", "")
		if d, _ := StateDir(); d != "/home/u/.local/state/moat" {
			t.Errorf("StateDir() without XDG_STATE_HOME = %q", d)
		}
	}
	t.Setenv("MOAT_STATE_DIR", "/s")
	if d, _ := StateDir(); d != "/s" {
		t.Errorf("StateDir() with MOAT_STATE_DIR = %q", d)
	}
}

func TestSessionLifecycle(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	tree(t, ws, map[string]string{"a": "a\n"})
	s := &Store{Dir: filepath.Join(root, "state")}
	c, err := s.Create(ws, "fix-tests")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ws, "fix-tests"); !errors.Is(err, ErrExists) {
		t.Errorf("second Create of a session: %v", err)
	}
	for _, bad := range []string{"a/b", "0123456789ab", ".hidden"} {
		if _, err := s.Create(ws, bad); err == nil {
			t.Errorf("session name %q accepted", bad)
		}
	}
	// Two runs in one session accumulate.
	if err := c.Record([]string{"pip", "install", "x"}, []string{".git/hooks", "deploy"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(c.UpperDir(), "one"), []byte("1\n"), 0o644)
	c2, err := s.Open("fix-tests")
	if err != nil || c2.ID() != c.ID() {
		t.Fatalf("Open by session: %v", err)
	}
	c2.Record([]string{"pytest"}, []string{"deploy", ".envrc"})
	os.WriteFile(filepath.Join(c2.UpperDir(), "two"), []byte("2\n"), 0o644)
	c3, err := s.Open(c.ID())
	if err != nil {
		t.Fatal(err)
	}
	var args [][]string
	for _, cmd := range c3.Info().Commands {
		args = append(args, cmd.Args)
	}
	if want := [][]string{{"pip", "install", "x"}, {"pytest"}}; !reflect.DeepEqual(args, want) {
		t.Errorf("commands %q, want %q", args, want)
	}
	if got, want := c3.Protected(), []string{".git/hooks", "deploy", ".envrc"}; !reflect.DeepEqual(got, want) {
		t.Errorf("protected %q, want the runs' lists merged, %q", got, want)
	}
	changes, _ := c3.Changes()
	if got := summarize(changes); !reflect.DeepEqual(got, []string{"added file one", "added file two"}) {
		t.Errorf("accumulated changes %q", got)
	}
	infos, err := s.List()
	if err != nil || len(infos) != 1 || infos[0].Session != "fix-tests" || infos[0].Size <= 0 {
		t.Fatalf("List: %+v, %v", infos, err)
	}

	// The lock keeps a second user out while a run holds it.
	if err := c.Lock(); err != nil {
		t.Fatal(err)
	}
	if err := c3.Discard(); !errors.Is(err, ErrBusy) {
		t.Errorf("Discard while locked: %v", err)
	}
	c.Unlock()

	// Discard leaves no trace, even of directories a command made unreadable.
	os.MkdirAll(filepath.Join(c.WorkDir(), "work"), 0o755)
	os.Chmod(filepath.Join(c.WorkDir(), "work"), 0)
	os.Mkdir(filepath.Join(c.UpperDir(), "locked"), 0o755)
	os.WriteFile(filepath.Join(c.UpperDir(), "locked", "f"), nil, 0o644)
	os.Chmod(filepath.Join(c.UpperDir(), "locked"), 0)
	if err := c3.Discard(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Dir, "runs"))
	for _, e := range entries {
		if e.Name() != ".lock" {
			t.Errorf("left in the state directory: %s", e.Name())
		}
	}
	if _, err := s.Open("fix-tests"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open after Discard: %v", err)
	}
}

func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), make([]byte, 10000), 0o644)
	os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "g"))
	n, err := DirSize(dir)
	if err != nil || n < 10000 || n > 20000+8192 {
		t.Errorf("DirSize = %d, %v", n, err)
	}
}

func TestCopyMode(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	tree(t, ws, map[string]string{"a": "a\n", "d/b": "b\n", "d/c": "c\n", "l": "-> a", "ro/": ""})
	os.Chmod(filepath.Join(ws, "ro"), 0o555)
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "ro"), 0o755) })
	s := &Store{Dir: filepath.Join(root, "state")}
	c, err := s.CreateCopy(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	if d := diffManifests(manifest(t, ws, false), manifest(t, c.UpperDir(), false)); d != "" {
		t.Fatalf("copy differs:\n%s", d)
	}
	if changes, _ := c.Changes(); len(changes) != 0 {
		t.Errorf("fresh copy has changes %q", summarize(changes))
	}
	up := c.UpperDir()
	os.WriteFile(filepath.Join(up, "a"), []byte("A\n"), 0o644)
	os.Remove(filepath.Join(up, "d", "b"))
	os.WriteFile(filepath.Join(up, "n"), []byte("n\n"), 0o644)
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summarize(changes), []string{"modified file a", "deleted file d/b", "added file n"}; !reflect.DeepEqual(got, want) {
		t.Errorf("copy-mode changes %q, want %q", got, want)
	}
	if _, err := c.Apply(nil, nil); err != nil {
		t.Fatal(err)
	}
	if d := diffManifests(manifest(t, up, false), manifest(t, ws, false)); d != "" {
		t.Errorf("after apply:\n%s", d)
	}
}
