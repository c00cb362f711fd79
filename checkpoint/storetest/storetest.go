// Package storetest is the contract every checkpoint.Store backend passes: the file backend here,
// S3 against a real MinIO server in checkpoint/s3.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/checkpoint"
)

// Harness gives the suite a fresh store and a way to damage an object's stored bytes.
type Harness struct {
	New func(t *testing.T) checkpoint.Store
	// Corrupt changes the stored content of key without updating its recorded sha256.
	Corrupt func(t *testing.T, s checkpoint.Store, key string)
}

// Run runs the whole contract.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()
	t.Run("PutOpenRoundTrip", func(t *testing.T) {
		s := h.New(t)
		want := []byte("weights and optimizer state")
		info, err := s.Put(ctx, "trials/t1/00000001.tar", bytes.NewReader(want))
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != int64(len(want)) || len(info.SHA256) != 64 {
			t.Fatalf("info %+v", info)
		}
		if got := read(t, s, "trials/t1/00000001.tar"); !bytes.Equal(got, want) {
			t.Fatalf("read %q", got)
		}
	})
	t.Run("MissingIsErrNotExist", func(t *testing.T) {
		s := h.New(t)
		if _, _, err := s.Open(ctx, "trials/none/1"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("open missing: %v", err)
		}
		if err := s.Delete(ctx, "trials/none/1"); err != nil {
			t.Fatalf("delete missing: %v", err)
		}
	})
	t.Run("ReplaceAndList", func(t *testing.T) {
		s := h.New(t)
		for _, k := range []string{"trials/b/2", "trials/a/1", "trials/b/1", "other/x"} {
			if _, err := s.Put(ctx, k, bytes.NewReader([]byte(k))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Put(ctx, "trials/b/1", bytes.NewReader([]byte("new"))); err != nil {
			t.Fatal(err)
		}
		if got := read(t, s, "trials/b/1"); string(got) != "new" {
			t.Fatalf("replaced object reads %q", got)
		}
		list, err := s.List(ctx, "trials/b/")
		if err != nil || len(list) != 2 || list[0].Key != "trials/b/1" || list[1].Key != "trials/b/2" {
			t.Fatalf("list %+v %v", list, err)
		}
		if err := s.Delete(ctx, "trials/b/1"); err != nil {
			t.Fatal(err)
		}
		if list, _ := s.List(ctx, "trials/"); len(list) != 2 {
			t.Fatalf("after delete: %+v", list)
		}
	})
	t.Run("BadKeys", func(t *testing.T) {
		s := h.New(t)
		for _, k := range []string{"", "/abs", "../escape", "a/../../b", "a//b", "a/./b", "a/"} {
			if _, err := s.Put(ctx, k, bytes.NewReader(nil)); !errors.Is(err, checkpoint.ErrBadKey) {
				t.Errorf("put %q: %v", k, err)
			}
			if _, _, err := s.Open(ctx, k); !errors.Is(err, checkpoint.ErrBadKey) {
				t.Errorf("open %q: %v", k, err)
			}
		}
	})
	t.Run("LargeObject", func(t *testing.T) {
		s := h.New(t)
		big := make([]byte, 24<<20)
		rand.Read(big)
		if _, err := s.Put(ctx, "trials/big/1", bytes.NewReader(big)); err != nil {
			t.Fatal(err)
		}
		if got := read(t, s, "trials/big/1"); !bytes.Equal(got, big) {
			t.Fatal("large object differs")
		}
	})
	t.Run("CorruptDetected", func(t *testing.T) {
		s := h.New(t)
		if _, err := s.Put(ctx, "trials/c/1", bytes.NewReader([]byte("good bytes"))); err != nil {
			t.Fatal(err)
		}
		h.Corrupt(t, s, "trials/c/1")
		rc, _, err := s.Open(ctx, "trials/c/1")
		if err == nil {
			_, err = io.ReadAll(rc)
			rc.Close()
		}
		if !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Fatalf("corrupt object read with %v", err)
		}
	})
	t.Run("SaveRestoreDirKeepsTwoAndFallsBack", func(t *testing.T) {
		s := h.New(t)
		dir := filepath.Join(t.TempDir(), "ckpt")
		os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
		var keys []string
		for v := 1; v <= 3; v++ {
			os.WriteFile(filepath.Join(dir, "state.json"), []byte{byte('0' + v)}, 0o644)
			os.WriteFile(filepath.Join(dir, "sub", "w.bin"), bytes.Repeat([]byte{byte(v)}, 1000), 0o644)
			info, err := checkpoint.SaveDir(ctx, s, "t9", dir)
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, info.Key)
		}
		list, _ := s.List(ctx, "trials/t9/")
		if len(list) != checkpoint.Keep || list[1].Key != keys[2] {
			t.Fatalf("versions kept: %+v", list)
		}
		out := filepath.Join(t.TempDir(), "restored")
		r, ok, err := checkpoint.RestoreDir(ctx, s, "t9", out)
		if err != nil || !ok || r.Info.Key != keys[2] || len(r.Skipped) != 0 {
			t.Fatalf("restore: %+v %v %v", r, ok, err)
		}
		if b, _ := os.ReadFile(filepath.Join(out, "state.json")); string(b) != "3" {
			t.Fatalf("restored state %q", b)
		}
		// The version before a given one.
		r, ok, err = checkpoint.RestoreDirBefore(ctx, s, "t9", out, keys[2])
		if err != nil || !ok || r.Info.Key != keys[1] {
			t.Fatalf("restore before %s: %+v %v %v", keys[2], r, ok, err)
		}
		if b, _ := os.ReadFile(filepath.Join(out, "state.json")); string(b) != "2" {
			t.Fatalf("restored before the newest: state %q", b)
		}
		if _, ok, err = checkpoint.RestoreDirBefore(ctx, s, "t9", out, keys[1]); err != nil || ok {
			t.Fatalf("restore before the oldest kept: %v %v", ok, err)
		}
		// The newest is damaged: the one before is used, and the damage reported.
		h.Corrupt(t, s, keys[2])
		r, ok, err = checkpoint.RestoreDir(ctx, s, "t9", out)
		if err != nil || !ok || r.Info.Key != keys[1] || len(r.Skipped) != 1 || !errors.Is(r.Skipped[0], checkpoint.ErrCorrupt) {
			t.Fatalf("fallback restore: %+v %v %v", r, ok, err)
		}
		if b, _ := os.ReadFile(filepath.Join(out, "sub", "w.bin")); len(b) != 1000 || b[0] != 2 {
			t.Fatalf("fallback restored %d bytes of %v", len(b), b[:1])
		}
		// No checkpoint at all: an empty directory, ok false.
		r, ok, err = checkpoint.RestoreDir(ctx, s, "fresh", out)
		if err != nil || ok {
			t.Fatalf("fresh trial: %v %v", ok, err)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Fatalf("fresh trial's dir holds %v", entries)
		}
	})
	t.Run("RunPrefixAndClaim", func(t *testing.T) {
		root := h.New(t)
		prefix, err := checkpoint.RunPrefix(checkpoint.LayoutPerRun, "r-1")
		if err != nil {
			t.Fatal(err)
		}
		s, err := checkpoint.Prefixed(root, prefix)
		if err != nil {
			t.Fatal(err)
		}
		sibling, _ := checkpoint.Prefixed(root, "runs/r-10/") // its name starts with r-1's
		// An empty prefix claims; the same run claims again (a resume).
		for range 2 {
			if err := checkpoint.Claim(ctx, s, checkpoint.Owner{RunID: "r-1", Experiment: "e"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := checkpoint.Claim(ctx, s, checkpoint.Owner{RunID: "r-2"}); !errors.Is(err, checkpoint.ErrClaimed) || !strings.Contains(err.Error(), "run r-1's") {
			t.Fatalf("another run's claim: %v", err)
		}
		// Keys go under the prefix, and come back without it; a sibling sees none of them.
		dir := filepath.Join(t.TempDir(), "ckpt")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "state"), []byte("7"), 0o644)
		info, err := checkpoint.SaveDir(ctx, s, "b0-t0000", dir)
		if err != nil || !strings.HasPrefix(info.Key, "trials/b0-t0000/") {
			t.Fatalf("save: %+v %v", info, err)
		}
		if got := read(t, root, prefix+info.Key); len(got) == 0 {
			t.Fatal("nothing under the prefix in the store")
		}
		if list, err := s.List(ctx, ""); err != nil || len(list) != 2 || list[0].Key != checkpoint.OwnerKey || list[1].Key != info.Key {
			t.Fatalf("list under the prefix: %+v %v", list, err)
		}
		if list, err := sibling.List(ctx, ""); err != nil || len(list) != 0 {
			t.Fatalf("a sibling prefix lists %+v %v", list, err)
		}
		if _, ok, err := checkpoint.RestoreDir(ctx, sibling, "b0-t0000", filepath.Join(t.TempDir(), "r")); ok || err != nil {
			t.Fatalf("a sibling restored another run's checkpoint: %v %v", ok, err)
		}
		out := filepath.Join(t.TempDir(), "r")
		if _, ok, err := checkpoint.RestoreDir(ctx, s, "b0-t0000", out); !ok || err != nil {
			t.Fatalf("restore: %v %v", ok, err)
		}
		// Keys the prefix would make valid stay bad.
		for _, k := range []string{"", "..", "../r-2/x", "a/"} {
			if _, err := s.Put(ctx, k, bytes.NewReader(nil)); !errors.Is(err, checkpoint.ErrBadKey) {
				t.Errorf("put %q: %v", k, err)
			}
		}
		// Keys without a marker (written by something that did not claim) are refused too.
		bare, _ := checkpoint.Prefixed(root, "runs/r-3/")
		if _, err := bare.Put(ctx, "trials/t/1", bytes.NewReader([]byte("x"))); err != nil {
			t.Fatal(err)
		}
		if err := checkpoint.Claim(ctx, bare, checkpoint.Owner{RunID: "r-3"}); !errors.Is(err, checkpoint.ErrClaimed) {
			t.Fatalf("keys without a marker: %v", err)
		}
	})
}

func read(t *testing.T, s checkpoint.Store, key string) []byte {
	t.Helper()
	rc, _, err := s.Open(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}
