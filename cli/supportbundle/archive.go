package supportbundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"sort"
	"strings"
)

func (b *bundle) write(w io.Writer, o Options) (Summary, error) {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(b.files))
	for n := range b.files {
		names = append(names, n)
	}
	sort.Strings(names)
	s := Summary{Errors: b.errs}
	for _, n := range names {
		data := b.scrub(b.files[n])
		hdr := &tar.Header{Name: topDir + "/" + n, Mode: 0o644, Size: int64(len(data)), ModTime: o.Now()}
		if err := tw.WriteHeader(hdr); err != nil {
			return s, err
		}
		if _, err := tw.Write(data); err != nil {
			return s, err
		}
		s.Files++
		s.Bytes += len(data)
	}
	if err := tw.Close(); err != nil {
		return s, err
	}
	return s, zw.Close()
}

// tailFile returns at most max bytes of the end of a file, from a line
// start.
func tailFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max64(0, fi.Size()-max)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, err
	}
	if off > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return data, nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// Read returns the files of a bundle, by their names inside it (e.g.
// "etcd/endpoint-status.json").
func Read(r io.Reader) (map[string]string, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(h.Name, topDir+"/")] = string(b)
	}
}
