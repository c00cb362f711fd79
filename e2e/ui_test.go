package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// startUI starts `rubberband ui` with args and env, and returns the address it printed (with its
// ?token= when it printed one).
func startUI(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"ui"}, args...)...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("rubberband ui did not stop on SIGINT")
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := regexp.MustCompile(`serving the runs under .* on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case url := <-found:
		return url
	case <-time.After(30 * time.Second):
		t.Fatal("rubberband ui printed no address")
		return ""
	}
}

// chromium finds the browser: skipped locally when absent, a failure in CI like the servers.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is needed for the browser tests (make deps installs it)")
	}
	t.Skip("no chromium: `make deps` installs it")
	return ""
}

func browser(t *testing.T, exe string) (context.Context, context.CancelFunc) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.WindowSize(1400, 1000),
		chromedp.Flag("headless", true), chromedp.DisableGPU)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 150*time.Second)
	return ctx, func() { cancelTimeout(); cancelCtx(); cancelAlloc() }
}

// The dashboard in a real browser on a real run: the page follows the run live (trials done and
// the realized schedule grow), ends with the numbers `status -o json` gives, renders a trial's
// log holding <script> as text, and measures its load time and the latency from a journal
// record written to the page updated.
func TestUIBrowser(t *testing.T) {
	exe := chromium(t)
	root := t.TempDir()
	env := []string{"RUBBERBAND_ROOT=" + root, "AWS_SECRET_ACCESS_KEY=rb-ui-test-secret-value"}
	trainer := filepath.Join(filepath.Dir(binary), "rubberband-trainer")
	specFile := trialSpec(t, t.TempDir(), func(s string) string {
		s = strings.Replace(s, "name: e2e-synthetic", "name: ui-e2e", 1)
		// Every trial's log holds markup: the dashboard must show it as text.
		return strings.Replace(s, "trainer: {command: [rubberband, trainer, synthetic",
			`trainer: {command: [sh, -c, 'echo "<script>window.pwned=1</script><b>bold</b>"; exec "$0" "$@"', `+trainer+`, synthetic`, 1)
	})
	base := startUI(t, env, "--addr", "127.0.0.1:0")
	run := startRun(t, env, "run", specFile, "--time-scale", "0.2")
	state := filepath.Join(root, "ui-e2e")
	waitFor(t, state, "the run to start", func(j string) bool { return strings.Contains(j, `"ev":"stage"`) })

	// When each journal record appeared, polled every 2ms: what the page's updates are measured from.
	var mu sync.Mutex
	var lineSeen []time.Time
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			b, _ := os.ReadFile(filepath.Join(state, rundir.Journal))
			now := time.Now()
			n := strings.Count(string(b), "\n")
			mu.Lock()
			for len(lineSeen) < n {
				lineSeen = append(lineSeen, now)
			}
			mu.Unlock()
			select {
			case <-stopWatch:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()

	ctx, cancel := browser(t, exe)
	defer cancel()
	page := base + "runs/ui-e2e"
	begin := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("gantt-realized"))); err != nil {
		t.Fatalf("open the run page: %v", err)
	}
	wall := time.Since(begin)
	nav, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`(() => { const n = performance.getEntriesByType("navigation")[0];
			return {dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, response: n.responseEnd}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	type sample struct {
		Done   int    `json:"done"`
		Bars   int    `json:"bars"`
		Status string `json:"status"`
	}
	var samples []sample
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[sample](`({done: +document.getElementById("done").dataset.value,
			bars: document.querySelectorAll("#gantt-realized rect.train").length,
			status: document.getElementById("status").textContent})`))
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, s)
		if s.Status == "finished" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed the run finished: last %+v", s)
		}
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
	close(stopWatch)
	<-watched
	// It grew while the run went on, never went back, and was not drawn whole at once.
	doneValues, barValues := map[int]bool{}, map[int]bool{}
	for i, s := range samples {
		doneValues[s.Done], barValues[s.Bars] = true, true
		if i > 0 && s.Done < samples[i-1].Done {
			t.Fatalf("trials done went back: %+v", samples)
		}
	}
	if len(doneValues) < 4 || len(barValues) < 4 || samples[0].Done == samples[len(samples)-1].Done {
		t.Fatalf("the page did not grow live: %d distinct done counts, %d distinct bar counts over %d samples (first %+v, last %+v)",
			len(doneValues), len(barValues), len(samples), samples[0], samples[len(samples)-1])
	}

	// The final numbers are status's.
	out, errOut, code := rbEnv(t, binary, env, "status", "ui-e2e", "-o", "json")
	var st rundir.StatusJSON
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	wantDone := 0
	for _, s := range st.Stages {
		wantDone += s.Realized.Done
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(() => { const v = id => document.getElementById(id).dataset.value;
		return {done: v("done"), cost: v("cost"), elapsed: v("elapsed"), best: v("best"), trial: document.getElementById("best-trial").textContent}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	num := func(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f }
	if st.Best == nil || got["done"] != strconv.Itoa(wantDone) || num(got["cost"]) != st.Realized.Cost || num(got["elapsed"]) != st.Realized.JCT ||
		num(got["best"]) != st.Best.Metric || got["trial"] != st.Best.Trial {
		t.Fatalf("the page ends at %v; status says done %d, cost %v, JCT %v, best %+v", got, wantDone, st.Realized.Cost, st.Realized.JCT, st.Best)
	}

	// Latency: from a journal record appearing to the page updated with it.
	type pageUpdate struct {
		Seq int     `json:"seq"`
		T   float64 `json:"t"`
	}
	updates, err := chromedp.Run(ctx, chromedp.Evaluate[[]pageUpdate](`window.rbUpdates`))
	if err != nil {
		t.Fatal(err)
	}
	var lat []float64
	prev := 0
	for i, u := range updates {
		if i > 0 && u.Seq > prev && u.Seq <= len(lineSeen) {
			written := lineSeen[u.Seq-1]
			lat = append(lat, u.T-float64(written.UnixNano())/1e6)
		}
		prev = u.Seq
	}
	if len(lat) < 5 {
		t.Fatalf("only %d live updates measured", len(lat))
	}
	sort.Float64s(lat)
	t.Logf("page load: %.0f ms to DOMContentLoaded, %.0f ms to load, %v until the realized Gantt was visible (wall, chromedp)", nav["dcl"], nav["load"], wall.Round(time.Millisecond))
	t.Logf("SSE latency, journal record written to page DOM updated, over %d updates: median %.0f ms, p90 %.0f ms, max %.0f ms",
		len(lat), lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1])

	shots := os.Getenv("RB_UI_SCREENSHOTS")
	shoot := func(name string) {
		if shots == "" {
			return
		}
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shoot("ui-run.png")

	// A log with markup is text: the script in it neither runs nor becomes an element.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"runs/ui-e2e/trials/"+st.Best.Trial+"/log")); err != nil {
		t.Fatal(err)
	}
	logText, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("log").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	pwned, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.pwned === 1`))
	bold, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#log b, #log script").length`))
	if !strings.Contains(logText, "<script>window.pwned=1</script><b>bold</b>") || pwned || bold != 0 {
		t.Fatalf("the log page: pwned %v, %d elements from the log, text %.300q", pwned, bold, logText)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS("table.runs"))); err != nil {
		t.Fatal(err)
	}
	if rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-run="ui-e2e"] .badge.finished').length`)); err != nil || rows != 1 {
		t.Fatalf("the runs page: %d finished rows for ui-e2e (%v)", rows, err)
	}
	shoot("ui-runs.png")
	if shots != "" {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"plan?spec=run:ui-e2e"), chromedp.WaitVisible(chromedp.ID("deadline-curve"))); err != nil {
			t.Fatal(err)
		}
		shoot("ui-plan.png")
	}
	// Nothing from the environment is rendered.
	for _, p := range []string{"", "runs/ui-e2e", "plan?spec=run:ui-e2e"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(b), "rb-ui-test-secret-value") {
			t.Fatalf("GET /%s: %d, or it shows the environment's secret", p, resp.StatusCode)
		}
	}
}

// Bound beyond loopback, the dashboard wants its token on every request: a request without it is
// refused, the token opens it (once in the address, then by cookie), and a wrong one does not.
// On loopback without a token it answers to loopback names only.
func TestUIToken(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	url := startUI(t, nil, "--addr", "0.0.0.0:0", "--root", root)
	m := regexp.MustCompile(`^http://[^/]*:(\d+)/\?token=([0-9a-f]{32})$`).FindStringSubmatch(url)
	if m == nil {
		t.Fatalf("a non-loopback ui printed %q: no generated token", url)
	}
	base, token := "http://127.0.0.1:"+m[1]+"/", m[2]
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest("GET", base+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if h, ok := hdr["Host"]; ok {
			req.Host = h
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, p := range []string{"", "events", "plan", "static/app.js", "runs/x", "?token=" + strings.Repeat("0", 32)} {
		if r := get(p, nil); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /%s without the token: %d", p, r.StatusCode)
		}
	}
	if r := get("", map[string]string{"Authorization": "Bearer " + token}); r.StatusCode != 200 {
		t.Errorf("with the bearer token: %d", r.StatusCode)
	}
	r := get("?token="+token, nil)
	var cookie string
	for _, c := range r.Cookies() {
		if c.Name == "rb_token" && c.HttpOnly {
			cookie = c.Name + "=" + c.Value
		}
	}
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" || cookie == "" {
		t.Fatalf("?token=: %d to %q, cookie %q", r.StatusCode, r.Header.Get("Location"), cookie)
	}
	if r := get("plan", map[string]string{"Cookie": cookie}); r.StatusCode != 200 {
		t.Errorf("with the cookie: %d", r.StatusCode)
	}
	local := startUI(t, nil, "--addr", "127.0.0.1:0", "--root", root)
	if strings.Contains(local, "token") {
		t.Fatalf("a loopback ui printed a token: %s", local)
	}
	base = local
	if r := get("", nil); r.StatusCode != 200 {
		t.Errorf("loopback: %d", r.StatusCode)
	}
	if r := get("", map[string]string{"Host": "evil.example:80"}); r.StatusCode != http.StatusForbidden {
		t.Errorf("loopback asked by another host name: %d", r.StatusCode)
	}
}
