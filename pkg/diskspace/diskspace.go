// Package diskspace checks, before a snapshot is downloaded or restored,
// that the filesystem it goes to has room for it: a restore that runs out
// of space half-way leaves a partial file and a failure that says "no
// space left on device" far from its cause, and on a shared volume it
// takes the space from whatever else lives there. A check refuses before
// anything is written, naming the bytes needed and the bytes available.
package diskspace

import (
	"errors"
	"fmt"

	"github.com/etcdfed/etcdfed/internal/text"
)

// Margin is added to every need: room for the filesystem's own metadata,
// the checking child's temporary files and rounding of the estimates.
const Margin int64 = 64 << 20

// ErrInsufficient: the filesystem has less free space than the work needs.
var ErrInsufficient = errors.New("not enough free space")

// Free reports how many bytes an unprivileged writer may still write on
// the filesystem holding path (statfs's f_bavail times f_bsize). It is the
// seam of tests; Available is the real one.
type Free func(path string) (int64, error)

// Shortage is a refused check.
type Shortage struct {
	// Path is where the data would have gone; What says what it is.
	Path, What string
	// Need and Available are in bytes.
	Need, Available int64
}

func (s *Shortage) Error() string {
	return fmt.Sprintf("%s needs %d bytes (%s) free on the filesystem of %s, %d bytes (%s) are available; nothing was written: free space there or give it a larger volume",
		s.What, s.Need, text.Bytes(s.Need), s.Path, s.Available, text.Bytes(s.Available))
}

// Unwrap makes a Shortage an ErrInsufficient.
func (s *Shortage) Unwrap() error { return ErrInsufficient }

// Check refuses (a *Shortage) when the filesystem of path has less than
// need bytes available, as free reports it (nil: Available). what names
// the work for the message, such as "restoring snapshot x (1.2 GiB)".
func Check(free Free, path string, need int64, what string) error {
	if free == nil {
		free = Available
	}
	avail, err := free(path)
	if err != nil {
		return fmt.Errorf("read free space of %s: %w", path, err)
	}
	if avail < need {
		return &Shortage{Path: path, What: what, Need: need, Available: avail}
	}
	return nil
}
