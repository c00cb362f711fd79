package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/server/store/sqlstore"
)

// oneTeamRoot makes team ml with the users named (the first an admin) under a new root and
// returns the root and their tokens.
func oneTeamRoot(t *testing.T, users ...string) (root string, tokens map[string]string) {
	t.Helper()
	root = t.TempDir()
	if _, errOut, code := rb(t, "server", "teams", "add", "ml", "--root", root); code != 0 {
		t.Fatal(errOut)
	}
	tokens = map[string]string{}
	for i, u := range users {
		args := []string{"server", "users", "add", u, "--team", "ml", "--root", root}
		if i == 0 {
			args = append(args, "--admin")
		}
		out, errOut, code := rb(t, args...)
		if code != 0 {
			t.Fatal(errOut)
		}
		tokens[u] = strings.TrimSpace(out)
	}
	return root, tokens
}

// holdLease makes the database under root's lease another server's for an hour: the servers the
// test starts answer the API but start nothing, so that submitted runs stay queued.
func holdLease(t *testing.T, root string) {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), "sqlite:"+filepath.Join(root, "server.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ok, err := st.AcquireLease(context.Background(), "drivers", "a server elsewhere", time.Hour, time.Now()); !ok || err != nil {
		t.Fatalf("hold the lease: %v %v", ok, err)
	}
}

// dialFrom opens a connection to the server from the loopback address ip (127.0.0.0/8 is all
// this machine's).
func dialFrom(t *testing.T, ip, base string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reads c until the server closes it and says how long that took (false if it
// was still open after limit).
func closedWithin(c net.Conn, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return limit, false
	}
	return time.Since(start), true
}

// Slow clients, unauthenticated: 300 connections from one address that send half a request
// line, and bodies that never come (a POST with Content-Length whose handler refuses it 401: the
// server drains the body first). The server closes the connections one address holds beyond
// --max-conns-per-ip as it accepts them, closes the slow ones at --read-header-timeout and
// --body-timeout, and answers /api/v1/health from another address meanwhile. On e91921a a slow
// body was held for ever.
func TestServerClosesSlowClients(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	srv := startServer(t, "--root", root, "--read-header-timeout", "1s", "--body-timeout", "1s", "--max-conns-per-ip", "20")
	const flood = 300
	slow := make([]net.Conn, flood)
	for i := range slow {
		slow[i] = dialFrom(t, "127.0.0.2", srv.base)
		fmt.Fprintf(slow[i], "GET /api/v1/health HT") // and nothing more
	}
	bodies := make([]net.Conn, 10)
	for i := range bodies {
		bodies[i] = dialFrom(t, "127.0.0.3", srv.base)
		fmt.Fprintf(bodies[i], "POST /api/v1/runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	}
	// Health answers at once from this address, whatever the others hold.
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(srv.base + "/api/v1/health")
	if err != nil {
		t.Fatalf("health under a flood of slow clients: %v", err)
	}
	resp.Body.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	early, late, open := 0, 0, 0
	for _, c := range append(slow, bodies...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			took, closed := closedWithin(c, 8*time.Second)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case !closed:
				open++
			case took < 700*time.Millisecond:
				early++
			default:
				late++
			}
		}()
	}
	wg.Wait()
	if open > 0 {
		t.Fatalf("%d of %d slow connections still open after 8 s (timeouts 1 s)", open, flood+len(bodies))
	}
	// 280 over the bound closed as accepted; the 20 held and the 10 slow bodies at their timeouts.
	if early < flood-20 || late < len(bodies) {
		t.Errorf("closed at once %d (want at least %d), at their timeouts %d", early, flood-20, late)
	}
}

// One user may not take every stream slot: with --max-streams-per-user 2, alice's third event
// stream is refused 429 with the reason, while bob still gets one, and a slot comes back when
// one of her streams ends. On e91921a one user took all 256.
func TestServerStreamSlotsPerUser(t *testing.T) {
	t.Parallel()
	root, tokens := oneTeamRoot(t, "alice", "bob")
	holdLease(t, root) // the run stays queued: its stream stays open
	srv := startServer(t, "--root", root, "--max-streams-per-user", "2")
	alice, _ := client.New(srv.base, tokens["alice"])
	// Two queued runs: alice's first stream follows the one she cancels later, which ends it.
	var runs [2]client.Run
	for i := range runs {
		r, _, err := alice.Submit(context.Background(), submissionOf(t, "e2e/testdata/synthetic.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = r
	}
	stream := func(user string, run client.Run) (*http.Response, string) {
		req, _ := http.NewRequest("GET", srv.base+"/api/v1/runs/"+run.ID+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+tokens[user])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp, string(b)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, ""
	}
	first, _ := stream("alice", runs[0])
	if second, _ := stream("alice", runs[1]); first.StatusCode != 200 || second.StatusCode != 200 {
		t.Fatalf("alice's streams: %d %d", first.StatusCode, second.StatusCode)
	}
	third, why := stream("alice", runs[1])
	if third.StatusCode != http.StatusTooManyRequests || !strings.Contains(why, "alice holds 2 open") {
		t.Fatalf("alice's third stream: %d %s", third.StatusCode, why)
	}
	if bob, why := stream("bob", runs[1]); bob.StatusCode != 200 {
		t.Fatalf("bob's stream while alice holds hers: %d %s", bob.StatusCode, why)
	}
	// Her first stream ends with its run: the server gives the slot back as its handler returns,
	// before the answer's end reaches her, so reading it to the end is the moment to ask again.
	if _, err := alice.Cancel(context.Background(), runs[0].ID); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(first.Body); err != nil || !strings.Contains(string(rest), "event: end") {
		t.Fatalf("alice's first stream did not end with its cancelled run: %v\n%s", err, rest)
	}
	if again, why := stream("alice", runs[1]); again.StatusCode != 200 {
		t.Fatalf("alice's slot did not come back once her stream ended: %d %s", again.StatusCode, why)
	}
}

// A submission of 322 KB whose name is 300 KB and whose spec has a thousand problems: the answer
// is a few KB naming the field (name), and a spec with thousands of long problems is answered
// with at most server.MaxProblems, each cut; the server's memory stays put. On e91921a the name
// was quoted in every problem: a 302 MB answer, 2.3 GB of RSS.
func TestServerBoundsErrorAnswers(t *testing.T) {
	t.Parallel()
	root, tokens := oneTeamRoot(t, "alice")
	srv := startServer(t, "--root", root)
	var problems strings.Builder
	good := string(readFileBytes("testdata/synthetic.yaml"))
	problems.WriteString(good)
	for i := range 1000 {
		fmt.Fprintf(&problems, "unknown_%04d_%s: 1\n", i, strings.Repeat("k", 8))
	}
	hwm := func() int {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.cmd.Process.Pid))
		for _, line := range strings.Split(string(b), "\n") {
			if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				var n int
				fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), &n)
				return n << 10
			}
		}
		return 0
	}
	before := hwm()
	submit := func(sub server.Submission) (int, []byte) {
		body, _ := json.Marshal(sub)
		req, _ := http.NewRequest("POST", srv.base+"/api/v1/runs", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokens["alice"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		return resp.StatusCode, b
	}
	longName := server.Submission{Name: strings.Repeat("n", 300<<10) + ".yaml", Spec: problems.String()}
	code, answer := submit(longName)
	if code != http.StatusUnprocessableEntity || len(answer) > 4<<10 || !strings.Contains(string(answer), "name: ") {
		t.Fatalf("the long-named submission: %d, %d bytes: %.300s", code, len(answer), answer)
	}
	// A short name, and every problem quoting a 1000-byte field name (YAML's longest key): at
	// most MaxProblems, each cut.
	var long strings.Builder
	long.WriteString(good)
	for i := range 150 {
		fmt.Fprintf(&long, "unknown_%04d_%s: 1\n", i, strings.Repeat("k", 1000))
	}
	code, answer = submit(server.Submission{Name: "spec.yaml", Spec: long.String()})
	var e struct {
		Error    string
		Problems []string
	}
	json.Unmarshal(answer, &e)
	if code != http.StatusUnprocessableEntity || len(e.Problems) != server.MaxProblems+1 || !strings.Contains(e.Problems[server.MaxProblems], "50 more") {
		t.Fatalf("a spec with 150 long problems: %d, %d problems: %.500s", code, len(e.Problems), answer)
	}
	if len(answer) > 2*server.MaxProblems*server.MaxProblemBytes || !strings.Contains(e.Problems[0], "unknown_0000") {
		t.Errorf("the answer holds %d bytes: %.300s", len(answer), e.Problems[0])
	}
	if grew := hwm() - before; grew > 100<<20 {
		t.Errorf("the server's peak memory grew %d MB answering them", grew>>20)
	}
}

// The dashboard answers on the server's own names (--public-url's, --allow-host's) and loopback,
// and refuses any other (a name re-pointed at the server: DNS rebinding). On e91921a it answered
// Host: localhost only.
func TestServerDashboardAnswersItsHosts(t *testing.T) {
	t.Parallel()
	root, tokens := oneTeamRoot(t, "alice")
	srv := startServer(t, "--root", root, "--public-url", "https://Rubberband.example:8443", "--allow-host", "rb.internal")
	for host, want := range map[string]int{"rubberband.example:8443": 200, "rb.internal": 200, "localhost:1234": 200, "127.0.0.1": 200, "evil.example": 403} {
		req, _ := http.NewRequest("GET", srv.base+"/", nil)
		req.Host = host
		req.AddCookie(&http.Cookie{Name: "rb_token", Value: tokens["alice"]})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("the dashboard as Host %s: %d, want %d: %.200s", host, resp.StatusCode, want, b)
		}
	}
	if _, errOut, code := rb(t, "server", "--root", root, "--public-url", "rubberband.example"); code != 2 || !strings.Contains(errOut, "--public-url") {
		t.Errorf("a public URL without scheme: exit %d: %s", code, errOut)
	}
}

// A write authenticated by the dashboard's cookie must come from the server's own origin: an
// admin's browser made to post a new admin user by another site (a forged Origin, a cross-site
// fetch, no origin at all) is refused 403 and nothing is made; the same from the server's own
// page, or with a bearer token (a script), goes through. On e91921a the forged post made an admin.
func TestServerRefusesCrossOriginCookieWrites(t *testing.T) {
	t.Parallel()
	root, tokens := oneTeamRoot(t, "root")
	srv := startServer(t, "--root", root)
	host := strings.TrimPrefix(srv.base, "http://")
	post := func(name string, headers map[string]string, cookie bool) int {
		req, _ := http.NewRequest("POST", srv.base+"/api/v1/users", strings.NewReader(`{"name":"`+name+`","team":"ml","admin":true}`))
		if cookie {
			req.AddCookie(&http.Cookie{Name: "rb_token", Value: tokens["root"]})
		} else {
			req.Header.Set("Authorization", "Bearer "+tokens["root"])
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, h := range map[string]map[string]string{
		"forged":    {"Origin": "http://evil.example"},
		"sibling":   {"Origin": "http://" + host, "Sec-Fetch-Site": "same-site"},
		"referer":   {"Referer": "http://evil.example/page"},
		"null":      {"Origin": "null"},
		"no-origin": {},
	} {
		if code := post("m-"+name, h, true); code != http.StatusForbidden {
			t.Errorf("a %s cookie write: %d, want 403", name, code)
		}
	}
	if code := post("own-page", map[string]string{"Origin": "http://" + host}, true); code != http.StatusCreated {
		t.Errorf("a cookie write from the server's own page: %d", code)
	}
	if code := post("script", map[string]string{"Origin": "http://evil.example"}, false); code != http.StatusCreated {
		t.Errorf("a bearer write: %d", code)
	}
	req, _ := http.NewRequest("GET", srv.base+"/api/v1/users", nil)
	req.Header.Set("Authorization", "Bearer "+tokens["root"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var users []store.User
	json.NewDecoder(resp.Body).Decode(&users)
	resp.Body.Close()
	if len(users) < 3 {
		t.Fatalf("users: %+v", users)
	}
	for _, u := range users {
		if strings.HasPrefix(u.Name, "m-") {
			t.Errorf("a refused write made user %s", u.Name)
		}
	}
}

// A server that redirects the API elsewhere (another port of the same host here: net/http would
// forward the token there) does not get the token sent on: neither the CLI (the Go client) nor
// the Python client forwards it across origins, while a redirect within the server keeps it.
// On e91921a both sent it.
func TestClientsDropTheTokenOnACrossOriginRedirect(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	saw := map[string]string{} // path -> Authorization there
	record := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		saw[r.Host+r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "[]")
	}
	elsewhere := httptest.NewServer(http.HandlerFunc(record))
	defer elsewhere.Close()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/runs":
			http.Redirect(w, r, "/moved/api/v1/runs?"+r.URL.RawQuery, http.StatusTemporaryRedirect) // within the server
		case "/moved/api/v1/runs":
			mu.Lock()
			saw["home-hop"] = r.Header.Get("Authorization")
			mu.Unlock()
			http.Redirect(w, r, elsewhere.URL+"/api/v1/runs", http.StatusTemporaryRedirect)
		}
	}))
	defer home.Close()
	check := func(who string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		away := strings.TrimPrefix(elsewhere.URL, "http://") + "/api/v1/runs"
		if _, reached := saw[away]; !reached || saw[away] != "" {
			t.Errorf("%s: the other origin was reached %v and got %q", who, reached, saw[away])
		}
		if saw["home-hop"] != "Bearer rbt_secret" {
			t.Errorf("%s: a redirect within the server lost the token: %q", who, saw["home-hop"])
		}
		clear(saw)
	}
	env := []string{"RUBBERBAND_SERVER=" + home.URL, "RUBBERBAND_TOKEN=rbt_secret"}
	if _, errOut, code := rbEnv(t, binary, env, "list"); code != 0 {
		t.Fatalf("list: %s", errOut)
	}
	check("the CLI")
	py := exec.Command("python3", "-c", "from rubberband import Client; print(Client().runs())")
	py.Dir = ".."
	py.Env = append(os.Environ(), append(env, "PYTHONPATH=python")...)
	if out, err := py.CombinedOutput(); err != nil {
		t.Fatalf("python client: %v\n%s", err, out)
	}
	check("the Python client")
}

// Two servers on one database whose roots are not shared, and no mirror: the one holding the
// lease is given a run whose folder the other made. It says so, in its log and the run's
// message, and leaves the run running; once it stops, the server that has the folder takes the
// lease and finishes the run. On e91921a the run was failed for good.
func TestServerLeavesARunItCannotSeeToItsOwner(t *testing.T) {
	t.Parallel()
	dbDir := t.TempDir()
	db := "sqlite:" + filepath.Join(dbDir, "server.db")
	if _, errOut, code := rb(t, "server", "teams", "add", "ml", "--db", db); code != 0 {
		t.Fatal(errOut)
	}
	out, errOut, code := rb(t, "server", "users", "add", "alice", "--team", "ml", "--db", db)
	if code != 0 {
		t.Fatal(errOut)
	}
	blind := startServer(t, "--root", t.TempDir(), "--db", db, "--lease", "1s")
	blind.waitSaid(t, "holds the lease")
	owner := startServer(t, "--root", t.TempDir(), "--db", db, "--lease", "1s")
	cl, _ := client.New(owner.base, strings.TrimSpace(out))
	run, _, err := cl.Submit(context.Background(), submissionOf(t, "e2e/testdata/synthetic.yaml")) // its folder is under owner's root
	if err != nil {
		t.Fatal(err)
	}
	blind.waitSaid(t, "cannot see this run's folder")
	got, err := cl.Run(context.Background(), run.ID)
	if err != nil || got.State != store.Running || !strings.Contains(got.Message, "is left running for a server that sees it") {
		t.Fatalf("the run the driving server cannot see: %+v %v\n%s", got, err, blind.log)
	}
	blind.cmd.Process.Signal(syscall.SIGINT) // it gives the lease up
	blind.cmd.Wait()
	end := waitRun(t, cl, run.ID, "ended", func(r client.Run) bool { return r.State.Ended() })
	if end.State != store.Finished || strings.Contains(end.Message, "not driven") {
		t.Fatalf("under the server that has its folder: %+v\n%s", end, owner.log)
	}
}
