package server_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/trial/codebundle"
)

// put uploads body as bundle id for user and returns the status and body.
func (a *api) put(user, id string, body []byte) (int, string) {
	a.t.Helper()
	return a.send(user, "PUT", "/api/v1/code/"+id, codebundle.MediaType, bytes.NewReader(body))
}

// A team's code bundle: stored once it unpacks to its ID, known to its team alone (HEAD, and a
// submission naming it), refused when hostile or not what its ID says; a submission names the
// files it lacks (missing_files).
func TestCodeBundlesPerTeam(t *testing.T) {
	a := newAPI(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "train.py"), []byte("print(1)\n"), 0o644)
	var buf bytes.Buffer
	m, err := codebundle.Pack(dir, codebundle.Limits{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := a.do("alice", "HEAD", "/api/v1/code/"+m.SHA256, nil); code != 404 {
		t.Fatalf("HEAD before the upload: %d", code)
	}
	if code, body := a.put("alice", m.SHA256, buf.Bytes()); code != 201 {
		t.Fatalf("upload: %d %s", code, body)
	}
	if code, _ := a.do("alice", "HEAD", "/api/v1/code/"+m.SHA256, nil); code != 200 {
		t.Fatalf("HEAD after the upload: %d", code)
	}
	// Team cv does not see team ml's bundle, nor may it run it.
	if code, _ := a.do("carol", "HEAD", "/api/v1/code/"+m.SHA256, nil); code != 404 {
		t.Errorf("another team's HEAD: %d", code)
	}
	spec, err := os.ReadFile("../e2e/testdata/synthetic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	code, body := a.do("carol", "POST", "/api/v1/runs", server.Submission{Spec: string(spec), Code: m.SHA256})
	if code != 422 || !strings.Contains(body, "was not uploaded") {
		t.Errorf("another team's code in a submission: %d %s", code, body)
	}
	// Bytes that are not what the ID says, and a hostile bundle.
	if code, body := a.put("alice", strings.Repeat("a", 64), buf.Bytes()); code != 422 || !strings.Contains(body, "hash to") {
		t.Errorf("a bundle under another ID: %d %s", code, body)
	}
	var evil bytes.Buffer
	zw := gzip.NewWriter(&evil)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "../../escape", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	tw.Write([]byte("x"))
	tw.Close()
	zw.Close()
	if code, body := a.put("alice", strings.Repeat("b", 64), evil.Bytes()); code != 422 || !strings.Contains(body, "not a relative path") {
		t.Errorf("a hostile bundle: %d %s", code, body)
	}
	if code, _ := a.put("alice", "../../x", buf.Bytes()); code == 201 {
		t.Errorf("an ID that is a path was taken")
	}
	// The profile file a spec names, not sent: listed for the client to send.
	noProfile := strings.Replace(string(spec), "profile:", "profile: {file: prof.yaml}\nold_profile:", 1)
	code, body = a.do("alice", "POST", "/api/v1/runs", server.Submission{Spec: noProfile})
	var refused struct {
		Missing []string `json:"missing_files"`
	}
	if code != 422 || json.Unmarshal([]byte(body), &refused) != nil || len(refused.Missing) != 1 || refused.Missing[0] != "prof.yaml" {
		t.Errorf("a spec whose profile file was not sent: %d %s", code, body)
	}
}

// A team keeps at most MaxTeamBundles bundles: the oldest go.
func TestCodeBundlesArePruned(t *testing.T) {
	a := newAPI(t)
	for i := range server.MaxTeamBundles + 2 {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "train.py"), []byte(strings.Repeat("x", i+1)), 0o644)
		var buf bytes.Buffer
		m, err := codebundle.Pack(dir, codebundle.Limits{}, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := a.put("alice", m.SHA256, buf.Bytes()); code != 201 {
			t.Fatalf("upload %d: %d %s", i, code, body)
		}
	}
	kept, _ := filepath.Glob(filepath.Join(a.root, "teams", "ml", "code", "*.tar.gz"))
	if len(kept) != server.MaxTeamBundles {
		t.Fatalf("team ml keeps %d bundles, want %d", len(kept), server.MaxTeamBundles)
	}
}
