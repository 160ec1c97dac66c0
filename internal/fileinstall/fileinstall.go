// Package fileinstall puts a copy of an executable in place.
package fileinstall

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// CopyExecutable copies src to dst with mode perm through a temporary
// file in dst's directory renamed into place, so that nobody runs a
// half-written binary. dst's directory is made when missing. A copy, not
// a link: writing over dst later leaves src as it was.
func CopyExecutable(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open binary: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("make directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".install-*")
	if err != nil {
		return fmt.Errorf("create binary: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("copy binary: %w", err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("make binary executable: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write binary: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("install binary: %w", err)
	}
	return nil
}
