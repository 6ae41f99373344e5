//go:build !linux

package audit

import "os"

// rootDir is a dirHandle of os.Root, which opens a directory to read it.
type rootDir struct{ *os.Root }

func openRoot() (dirHandle, error) {
	r, err := os.OpenRoot("/")
	if err != nil {
		return nil, err
	}
	return rootDir{r}, nil
}

func (d rootDir) sub(name string) (dirHandle, error) {
	r, err := d.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	return rootDir{r}, nil
}

func (d rootDir) sync() {
	if f, err := d.Open("."); err == nil {
		f.Sync()
		f.Close()
	}
}
