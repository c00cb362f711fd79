"""A client of a rubberband server's API (/api/v1, docs/openapi.yaml), standard library only."""
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


class ServerError(Exception):
    """An error the server answered with.

    Attributes:
        status (int): the HTTP status (404 no such run, 409 a name several runs have, 422 a spec
            with problems or a plan that misses its deadline...).
        message (str): what the server said.
        problems (list of str): for a spec with problems, each one, naming its field and line.
        body (dict): the whole answer.
    """

    def __init__(self, status, message, problems=None, body=None):
        super().__init__(message if not problems else message + ":\n  " + "\n  ".join(problems))
        self.status = status
        self.message = message
        self.problems = problems or []
        self.body = body or {}


class Refused(ServerError):
    """A submission refused over the team's budget, quotas or queue limits; its message names
    which and the figures.

    Attributes:
        refusal (dict): the figures: reason ("budget", "quota" or "queue"), team, and
            predicted_cost_usd, remaining_budget_usd, budget_usd and spent_usd; gpus, max_gpus,
            nodes and max_nodes; or queued, max_queued and queued_by (HTTP 429: submit again
            once the queue moves).
        status, message, problems, body: as ServerError's.
    """

    @property
    def refusal(self):
        return self.body.get("refusal") or {}


class _KeepTokenHome(urllib.request.HTTPRedirectHandler):
    """Follows a redirect without the token when it leads to another origin (scheme, host or
    port): urllib's own handler sends every header of the request on, Authorization too."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(new.full_url) != _origin(req.full_url):
            for name in [k for k in new.headers if k.lower() == "authorization"]:
                del new.headers[name]
            new.unredirected_hdrs.pop("Authorization", None)
        return new


def _origin(url):
    u = urllib.parse.urlsplit(url)
    port = u.port or {"http": 80, "https": 443}.get(u.scheme)
    return (u.scheme, (u.hostname or "").lower(), port)


_opener = urllib.request.build_opener(_KeepTokenHome)


class Client:
    """A rubberband server and the token it is spoken to with (docs/notebook.md).

    Attributes:
        url (str): the server's URL; Client(url=None) reads RUBBERBAND_SERVER.
        token (str): the token `rubberband server users add` printed; Client(token=None) reads
            RUBBERBAND_TOKEN.
        timeout (float): seconds to wait for an answer (a run's event stream waits longer:
            Run.progress).
    """

    def __init__(self, url=None, token=None, timeout=60):
        self.url = (url or os.environ.get("RUBBERBAND_SERVER", "")).rstrip("/")
        self.token = token or os.environ.get("RUBBERBAND_TOKEN", "")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError("url %r: an http:// or https:// URL of a rubberband server" % self.url)
        if not self.token:
            raise ValueError("no token: pass one, or set RUBBERBAND_TOKEN to what `rubberband server users add` printed")
        self.timeout = timeout

    def _request(self, method, path, body=None, raw=False, timeout=None, data=None, content_type=None):
        headers = {"Authorization": "Bearer " + self.token}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif data is not None:
            headers["Content-Type"] = content_type or "application/octet-stream"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            resp = _opener.open(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                payload = json.loads(text)
            except ValueError:
                payload = {"error": "%s %s: %s %s" % (method, path, e.code, text.strip())}
            cls = Refused if e.code in (403, 429) and payload.get("refusal") else ServerError
            raise cls(e.code, payload.get("error", text), payload.get("problems"), payload) from None
        if raw:
            return resp
        with resp:
            return json.loads(resp.read().decode())

    def submit(self, spec, files=None, priority=0, name=None, workdir=None):
        """Submit a spec: a path to a YAML file (every file it names is sent with it, and its
        trainer's folder, trainer.workdir, as a code bundle: the server has none of this
        machine's files), its YAML text, or a dict. workdir overrides the folder sent (default:
        the spec's trainer.workdir, else the spec file's folder; none for text or a dict).
        Returns the queued Run; raises Refused over budget, quotas or queue limits and
        ServerError for a spec with problems."""
        files = dict(files or {})
        base = None
        if isinstance(spec, dict):
            text, name = json.dumps(spec), name or "spec.yaml"  # YAML is a superset of JSON
        elif isinstance(spec, str) and "\n" not in spec and os.path.exists(spec):
            with open(spec) as f:
                text = f.read()
            name = name or os.path.basename(spec)
            base = os.path.dirname(os.path.abspath(spec))
            files.update(_spec_files(base, text))
            named = _workdir_of(text)
            # An image holds its own code: its folder travels only when the spec names one.
            if workdir is None and (named or not _has_image(text)):
                workdir = os.path.join(base, named or ".")
        else:
            text, name = spec, name or "spec.yaml"
        body = {"name": name, "spec": text, "files": files, "priority": priority}
        if workdir is not None:
            body["code"] = self.send_code(workdir)
        try:
            out = self._request("POST", "/api/v1/runs", body)
        except ServerError as e:
            # The server names the files the spec refers to that were not sent: send them once.
            missing = [m for m in (e.body.get("missing_files") or []) if m not in files]
            if not missing or base is None:
                raise
            for ref in missing:
                full = ref if os.path.isabs(ref) else os.path.join(base, ref)
                if not os.path.isfile(full):
                    raise
                with open(full) as f:
                    files[ref] = f.read()
            out = self._request("POST", "/api/v1/runs", body)
        run = Run(self, out["run"])
        run.plan = out.get("plan")
        return run

    def send_code(self, folder):
        """Pack folder (a trainer's code: .gitignore and .rbignore respected, .git and
        .rubberband left out, at most 100 MiB) and upload it unless the team has it already;
        returns the bundle's ID, which a submission names in "code"."""
        from . import codebundle
        files = codebundle.scan(folder)
        bundle_id = codebundle.bundle_id(files)
        path = "/api/v1/code/" + bundle_id
        try:
            self._request("HEAD", path, raw=True).close()
            return bundle_id
        except ServerError as e:
            if e.status != 404:
                raise
        data = codebundle.pack(folder, files)
        self._request("PUT", path, data=data, content_type="application/gzip", raw=True).close()
        return bundle_id

    def runs(self, state=None):
        """The runs this token's user may see (their team's; an admin's, every team's)."""
        q = "?" + urllib.parse.urlencode({"state": state}) if state else ""
        return [Run(self, r) for r in self._request("GET", "/api/v1/runs" + q)]

    def run(self, run_id):
        """One run, by ID."""
        return Run(self, self._request("GET", "/api/v1/runs/" + urllib.parse.quote(run_id, safe="")))


def _spec_files(base, text):
    """The files a spec names (profile: {file: F}, and each instance type's), read beside it,
    by the names it gives them. With PyYAML the spec is parsed; without it a line reading finds
    `file:` keys only (never inside `profile:`), and the server names any file it missed
    (missing_files), which submit then sends."""
    out = {}
    for ref in _file_refs(text):
        full = ref if os.path.isabs(ref) else os.path.join(base, ref)
        if os.path.isfile(full):
            with open(full) as f:
                out[ref] = f.read()
    return out


def _file_refs(text):
    try:
        import yaml
    except ImportError:
        return [m.group(1).strip("'\"") for m in _FILE_KEY.finditer(text)]
    refs = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "file" and isinstance(v, str):
                    refs.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    try:
        walk(yaml.safe_load(text))
    except yaml.YAMLError:
        return []  # the server says what is wrong with it
    return refs


def _workdir_of(text):
    """trainer.workdir as the spec writes it, or None."""
    try:
        import yaml
        doc = yaml.safe_load(text)
        w = (doc.get("trainer") or {}).get("workdir") if isinstance(doc, dict) else None
        return w if isinstance(w, str) and w else None
    except ImportError:
        m = _WORKDIR_KEY.search(text)
        return m.group(1).strip("'\"") if m else None
    except Exception:
        return None


def _has_image(text):
    """Whether the spec's trainer is an image (trainer.image)."""
    try:
        import yaml
        doc = yaml.safe_load(text)
        return isinstance(doc, dict) and bool((doc.get("trainer") or {}).get("image"))
    except ImportError:
        return _IMAGE_KEY.search(text) is not None
    except Exception:
        return False


# A `file:` or `workdir:` key (block or flow style), not the end of a longer key such as profile.
_FILE_KEY = re.compile(r"(?:^|[\s{,])file\s*:\s*([^\s,}#]+)", re.M)
_WORKDIR_KEY = re.compile(r"(?:^|[\s{,])workdir\s*:\s*([^\s,}#]+)", re.M)
_IMAGE_KEY = re.compile(r"(?:^|[\s{,])image\s*:\s*([^\s,}#]+)", re.M)


class Run:
    """One run on the server, as the server last said (refresh() asks again).

    Attributes:
        fields (dict): the run as the API gives it (docs/openapi.yaml, Run); each field is read
            as an attribute too: id, name, team, user, state (queued, running, paused, finished,
            failed, cancelled), message (why it ended or waits), predicted_cost_usd,
            predicted_jct_s, predicted_start, cost_usd (charged so far), gpus, nodes...
        plan (dict or None): the plan the server made at submit (submit's answer), else None.
        ended (bool, read-only): finished, failed or cancelled.
        paused (bool, read-only): an infrastructure fault paused it; resume() once mended.
    """

    def __init__(self, client, fields):
        self._client = client
        self.fields = fields
        self.plan = None

    def __getattr__(self, name):
        try:
            return self.__dict__["fields"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self):
        return "Run(%s %s: %s)" % (self.fields.get("id"), self.fields.get("name"), self.fields.get("state"))

    def _path(self, what=""):
        return "/api/v1/runs/" + urllib.parse.quote(self.fields["id"], safe="") + what

    def refresh(self):
        self.fields = self._client._request("GET", self._path())
        return self

    @property
    def ended(self):
        return self.fields.get("state") in ("finished", "failed", "cancelled")

    @property
    def paused(self):
        """An infrastructure fault (a full disk, a checkpoint store down) paused the run: its
        message says what and where; resume() once it is mended."""
        return self.fields.get("state") == "paused"

    def wait(self, timeout=None, every=1.0):
        """Wait until the run ends or pauses (or timeout seconds pass: TimeoutError), and
        return it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not (self.refresh().ended or self.paused):
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("run %s is still %s" % (self.fields["id"], self.fields["state"]))
            time.sleep(every)
        return self

    def progress(self, timeout=3600):
        """Yields the run's progress as its journal grows, until it ends or pauses: a dict at each
        step a person follows (the run's start; a stage's start and end; a trial done, or given
        up; the run's finish, stop or cancel) with event (its kind: start, stage, sync, done,
        fail, finish, stop, cancel), elapsed_s (since the run's start), bracket, stage (from 1),
        stage_trials and stage_done (the trials of that stage, and how many are done), trials
        (sampled so far), failed (given up so far) and, for a trial, trial and metric (the
        objective it reached), and error where there is one. It reads the server's event stream
        (no polling); a dropped connection is taken up where it stopped. timeout is the longest
        wait for the next event, in seconds."""
        seen = 0  # events taken, counted from the stream's start (each connection starts there)
        start, sampled, failed = None, {}, 0
        size, done, where = {}, {}, (0, 0)  # by bracket: its stage's trials and those done
        while True:
            try:
                with self._client._request("GET", self._path("/events"), raw=True, timeout=timeout) as resp:
                    n, kind = 0, ""
                    for raw in resp:
                        line = raw.decode(errors="replace").rstrip("\r\n")
                        if line == "":
                            kind = ""
                            continue
                        if line.startswith("event: "):
                            kind = line[7:]
                            continue
                        if not line.startswith("data: "):
                            continue
                        if kind == "end":
                            self.refresh()
                            return
                        n += 1
                        if kind or n <= seen:
                            continue
                        seen = n
                        e = json.loads(line[6:])
                        ev, b, k = e.get("ev"), e.get("bracket", 0), e.get("stage", 0)
                        at = _seconds(e.get("at"))
                        if start is None:
                            start = at
                        if ev == "trial":
                            sampled[b] = sampled.get(b, 0) + 1
                        elif ev == "stage":
                            size.setdefault(b, sampled.get(b, 0))
                            done[b], where = 0, (b, k + 1)
                        elif ev == "sync":
                            where = (b, k + 1)
                        elif ev == "done":
                            done[b] = done.get(b, 0) + 1
                            where = (b, k + 1)
                        elif ev == "fail" and e.get("gave_up"):
                            failed += 1
                            where = (b, k + 1)
                        if ev not in ("start", "stage", "sync", "done", "fail", "finish", "stop", "cancel") or \
                                (ev == "fail" and not e.get("gave_up")):
                            continue
                        b, k = where
                        p = {"event": ev, "elapsed_s": at - start if at is not None and start is not None else 0.0,
                             "bracket": b, "stage": k, "stage_trials": size.get(b, 0), "stage_done": done.get(b, 0),
                             "trials": sum(sampled.values()), "failed": failed}
                        if ev in ("done", "fail"):
                            p["trial"] = e.get("trial")
                            if e.get("metric") is not None:
                                p["metric"] = e["metric"]
                        if e.get("error"):
                            p["error"] = e["error"]
                        if ev == "sync":
                            size[b] = len(e.get("keep") or [])  # the next stage's trials
                        yield p
            except (OSError, ValueError):  # the stream dropped: take it up again unless the run is over
                if self.refresh().ended or self.paused:
                    return

    def follow(self, out=None, timeout=3600):
        """Prints the run's progress (progress()) as one line a step, until it ends or pauses,
        then how it ended and what it cost; returns the run. out defaults to standard output."""
        out = out or sys.stdout
        words = {"start": "started", "stage": "stage started", "sync": "stage done", "done": "trial done",
                 "fail": "trial failed", "finish": "finished", "stop": "stopped", "cancel": "cancelled"}
        for p in self.progress(timeout=timeout):
            if p["event"] == "start":
                print("%7.1fs  started" % p["elapsed_s"], file=out, flush=True)
                continue
            of = "/%d of the stage's" % p["stage_trials"] if p["stage_trials"] else " of the stage's"  # ASHA's rungs have no fixed size
            line = "%7.1fs  bracket %d stage %d  %-13s  %d%s trials done, %d failed" % (
                p["elapsed_s"], p["bracket"], p["stage"], words[p["event"]], p["stage_done"], of, p["failed"])
            if "metric" in p:
                line += "  (%s: %.4g)" % (p["trial"], p["metric"])
            if "error" in p:
                line += "  " + p["error"]
            print(line, file=out, flush=True)
        f = self.fields
        print("run %s %s: %s%s; cost $%.4f (predicted $%.4f)" % (
            f.get("id"), f.get("name"), f.get("state"), " (" + f["message"] + ")" if f.get("message") else "",
            f.get("cost_usd") or 0.0, f.get("predicted_cost_usd") or 0.0), file=out, flush=True)
        return self

    def trials(self):
        """Every trial so far: a pandas DataFrame (one row a trial, its parameters and last
        metrics as columns) when pandas is installed, else a list of dicts."""
        rows, limit = [], 1000  # the server answers a page at a time
        while True:
            page = self._client._request("GET", self._path("/trials?offset=%d&limit=%d" % (len(rows), limit)))
            for t in page:
                row = {k: v for k, v in t.items() if k not in ("params", "config", "metrics")}
                row.update(t.get("params") or t.get("config") or {})
                row.update(t.get("metrics") or {})
                rows.append(row)
            if len(page) < limit:
                break
        try:
            import pandas
        except ImportError:
            return rows
        return pandas.DataFrame(rows)

    def best(self):
        """The best trial: its parameters (params), metric, value, iteration and curve."""
        return self._client._request("GET", self._path("/best"))

    def pareto(self):
        """A run of several objectives' Pareto front (empty for one objective): a pandas
        DataFrame when pandas is installed (one row a configuration: trial, iter, its
        objectives and constrained metrics, its parameters), else a list of dicts; each
        configuration's curve is in best()["pareto"]."""
        rows = []
        for m in self.best().get("pareto") or []:
            row = {"trial": m.get("trial"), "iter": m.get("iter")}
            row.update(m.get("metrics") or {})
            row.update(m.get("params") or {})
            rows.append(row)
        try:
            import pandas
        except ImportError:
            return rows
        return pandas.DataFrame(rows)

    def report(self, text=False):
        """Realized against predicted, stage by stage, and what the search found: a dict, as
        `rubberband report -o json` prints it; with text=True the text `rubberband report`
        prints."""
        if not text:
            return self._client._request("GET", self._path("/report"))
        return self._text("/report?output=table")

    def status(self, trials=False):
        """What `rubberband status` prints of the run, as text (with trials=True a row per
        trial), rendered by the server as on the run's own machine."""
        return self._text("/status" + ("?trials=1" if trials else ""))

    def _text(self, path):
        with self._client._request("GET", self._path(path), raw=True) as resp:
            return resp.read().decode(errors="replace")

    def logs(self, trial=None, tail=None):
        """The driver's log, or a trial's output, as text; with tail=N its last N lines."""
        q = {k: v for k, v in (("trial", trial), ("tail", tail)) if v is not None}
        return self._text("/logs" + ("?" + urllib.parse.urlencode(q) if q else ""))

    def cancel(self):
        """Cancel the run (a queued or paused one at once; a running one's nodes are released)."""
        self.fields = self._client._request("POST", self._path("/cancel"))
        return self

    def resume(self):
        """Queue a paused run again, once what paused it is mended; its driver carries on from
        its journal."""
        self.fields = self._client._request("POST", self._path("/resume"))
        return self


def _seconds(stamp):
    """An RFC 3339 time as seconds since the epoch (None if it does not read): Python 3.11's
    fromisoformat takes a Z and nanoseconds only once they are trimmed to microseconds."""
    if not stamp:
        return None
    import datetime
    s = stamp.replace("Z", "+00:00")
    head, dot, rest = s.partition(".")
    if dot:
        digits = rest[:len(rest) - len(rest.lstrip("0123456789"))]
        s = head + "." + digits[:6].ljust(6, "0") + rest[len(digits):]
    try:
        return datetime.datetime.fromisoformat(s).timestamp()
    except ValueError:
        return None
