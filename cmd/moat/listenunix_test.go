package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestListenUnixLeavesNothing: the directories made for a daemon's socket
// go with it; one holding something else stays (the control), and so
// does one that was there before.
func TestListenUnixLeavesNothing(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "a", "b", "s.sock")
	l, remove, err := listenUnix(path, 0o600, "--socket")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	remove()
	if _, err := os.Stat(filepath.Join(root, "a")); !os.IsNotExist(err) {
		t.Errorf("the socket's directories stay: %v", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Errorf("control: the directory that was there is gone: %v", err)
	}
	l, remove, err = listenUnix(path, 0o600, "--socket")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "a", "other"), nil, 0o600)
	l.Close()
	remove()
	if _, err := os.Stat(filepath.Join(root, "a", "other")); err != nil {
		t.Errorf("control: a directory holding another file was removed: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the socket stays: %v", err)
	}
}
