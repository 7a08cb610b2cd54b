package tools

import (
	"errors"
	"io/fs"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// maxStampEntries bounds the walk that stamps a search's folder: a tree
// larger than that is not stamped, and its searches are never served from
// the anti-loop's cache.
const maxStampEntries = 10000

var errStampBudget = errors.New("stamp budget spent")

// Stamp names the present state of what a built-in read depends on, given
// as [Key.Reads] names it: for "file:p" the file's size, modification time
// and mode; for "dir:p" the directory's (its modification time changes when
// an entry is added, removed or renamed, which is all a listing shows); for
// "tree:p" those of every file and folder under p. A missing file or folder
// has a stamp too: its absence. Equal stamps mean the read would return
// what it returned, unless a file was rewritten with the same size within
// the file system's time resolution (a few nanoseconds on ext4, more on
// some others).
//
// ok is false when the state cannot be stamped (no sandbox, an unknown
// kind, the root gone, a tree of more than maxStampEntries entries): a
// stored result must then not be served. Stamp reads no file content.
func (r *Registry) Stamp(reads string) (stamp string, ok bool) {
	kind, p, found := strings.Cut(reads, ":")
	if !found || r.sb == nil {
		return "", false
	}
	root, err := r.sb.open("stamp")
	if err != nil {
		return "", false
	}
	defer root.Close()
	var h xxhash.Digest // on the stack: Reset makes the zero value ready
	h.Reset()
	switch kind {
	case "file", "dir":
		fi, err := root.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return "absent", true
		}
		if err != nil {
			return "", false
		}
		writeInfo(&h, p, fi)
	case "tree":
		n := 0
		err := fs.WalkDir(root.FS(), p, func(name string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if n++; n > maxStampEntries {
				return errStampBudget
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			writeInfo(&h, name, fi)
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) && n == 0 {
			return "absent", true
		}
		if err != nil {
			return "", false
		}
	default:
		return "", false
	}
	return strconv.FormatUint(h.Sum64(), 16), true
}

// writeInfo adds one entry's name, size, modification time and mode to h.
func writeInfo(h *xxhash.Digest, name string, fi fs.FileInfo) {
	var b [64]byte
	out := append(b[:0], name...)
	out = append(out, 0)
	out = strconv.AppendInt(out, fi.Size(), 10)
	out = append(out, ' ')
	out = strconv.AppendInt(out, fi.ModTime().UnixNano(), 10)
	out = append(out, ' ')
	out = strconv.AppendUint(out, uint64(fi.Mode()), 10)
	out = append(out, '\n')
	h.Write(out)
}
