package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/proxy"
)

// spool keeps the entries Postgres has not taken yet in an append-only JSON
// lines file, so that a shutdown or a crash during an outage loses none of
// them: the next Writer on the same directory replays them. Each process
// appends to a file of its own, locked while it runs; a file nobody holds is
// an earlier process's, and is replayed and removed once written. Several
// replicas may share a directory. Replay is harmless twice over: the upsert
// keys rows by request and never lets a held row overwrite a final one.
type spool struct {
	dir     string
	own     *os.File
	orphans []*os.File // earlier processes' files, held until their entries are written
	dirty   bool       // own has entries not yet written to Postgres
}

// openSpool creates dir if needed, starts this process's file and returns the
// entries left by processes that are gone, in the order they were appended.
func openSpool(dir string) (*spool, []proxy.LedgerEntry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("ledger spool: %w", err)
	}
	s := &spool{dir: dir}
	paths, err := filepath.Glob(filepath.Join(dir, "ledger-*.jsonl"))
	if err != nil {
		return nil, nil, fmt.Errorf("ledger spool: %w", err)
	}
	var left []proxy.LedgerEntry
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			s.close()
			return nil, nil, fmt.Errorf("ledger spool: %w", err)
		}
		if !lock(f) {
			f.Close() // a live process's
			continue
		}
		entries, err := readSpool(f)
		if err != nil {
			f.Close()
			s.close()
			return nil, nil, fmt.Errorf("ledger spool %s: %w (move the file aside to start without it)", p, err)
		}
		if len(entries) == 0 {
			os.Remove(p)
			f.Close()
			continue
		}
		s.orphans = append(s.orphans, f)
		left = append(left, entries...)
	}
	name := filepath.Join(dir, "ledger-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".jsonl")
	s.own, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		s.close()
		return nil, nil, fmt.Errorf("ledger spool: %w", err)
	}
	if !lock(s.own) {
		s.close()
		return nil, nil, fmt.Errorf("ledger spool: cannot lock %s", name)
	}
	return s, left, syncDir(dir)
}

func lock(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// readSpool decodes a spool file. A last line cut short is an append the
// crash interrupted before it was synced, so nothing had counted on it.
func readSpool(f *os.File) ([]proxy.LedgerEntry, error) {
	var out []proxy.LedgerEntry
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err != nil && len(line) == 0 {
			return out, nil
		}
		var e proxy.LedgerEntry
		if jerr := json.Unmarshal(line, &e); jerr != nil {
			if err != nil { // no newline: the torn last append
				return out, nil
			}
			return nil, fmt.Errorf("line %d: %w", n, jerr)
		}
		out = append(out, e)
		if err != nil {
			return out, nil
		}
	}
}

// append writes entries to this process's file and syncs it.
func (s *spool) append(entries []proxy.LedgerEntry) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range entries {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	if _, err := s.own.Write(buf.Bytes()); err != nil {
		return err
	}
	if err := s.own.Sync(); err != nil {
		return err
	}
	s.dirty = true
	return nil
}

// clear forgets every spooled entry: all of them are in Postgres now.
func (s *spool) clear() error {
	if s.dirty {
		if err := s.own.Truncate(0); err != nil {
			return err
		}
		if err := s.own.Sync(); err != nil {
			return err
		}
		s.dirty = false
	}
	if len(s.orphans) == 0 {
		return nil
	}
	for _, f := range s.orphans {
		if err := os.Remove(f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		f.Close()
	}
	s.orphans = nil
	return syncDir(s.dir)
}

// close releases the files. This process's file is removed when it holds
// nothing unwritten; otherwise it stays for the next start to replay.
func (s *spool) close() {
	for _, f := range s.orphans {
		f.Close()
	}
	s.orphans = nil
	if s.own != nil {
		if !s.dirty {
			os.Remove(s.own.Name())
		}
		s.own.Close()
		s.own = nil
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
