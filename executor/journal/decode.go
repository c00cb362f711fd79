package journal

import (
	"bytes"
	"strconv"
	"time"
	"unicode/utf8"
)

// decodeFast reads the common shapes of a record (what a run writes a million of: launch,
// report, done, trial, sync, stage) without encoding/json, which spends ~6 µs a record on them:
// a 100,000-trial journal read in seconds instead of tens. It reports false for anything it
// does not read itself (an object field but metrics — a node, params, a plan, a forecast —, an
// escaped string, an unknown key, JSON it does not expect), and the caller decodes the line
// with encoding/json: the two agree on every line decodeFast takes (TestDecodeFastAgrees).
// key keeps the metric name last read from one line to the next.
func decodeFast(line []byte, e *Event, key *string) bool {
	d := fastDecoder{b: line, key: key}
	if !d.byte('{') {
		return false
	}
	if d.peek('}') {
		return false
	}
	for {
		key, ok := d.str()
		if !ok || !d.byte(':') || !d.field(key, e) {
			return false
		}
		if d.byte(',') {
			continue
		}
		return d.byte('}') && d.i == len(d.b)
	}
}

type fastDecoder struct {
	b []byte
	i int
	// key is the metric name last read: a run reports the same few, so that a million reports
	// share one string rather than allocate one each.
	key *string
}

// intern returns k as a string, *d.key when it is the same.
func (d *fastDecoder) intern(k []byte) string {
	if string(k) != *d.key {
		*d.key = string(k)
	}
	return *d.key
}

// byte consumes c if it comes next (no white space: the journal writes none).
func (d *fastDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *fastDecoder) peek(c byte) bool { return d.i < len(d.b) && d.b[d.i] == c }

// str reads a string without escapes (those go to encoding/json) and returns its bytes.
func (d *fastDecoder) str() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	j := bytes.IndexByte(d.b[d.i:], '"')
	if j < 0 {
		return nil, false
	}
	s := d.b[d.i : d.i+j]
	if bytes.IndexByte(s, '\\') >= 0 {
		return nil, false
	}
	for _, c := range s {
		if c < 0x20 || c >= utf8.RuneSelf && !utf8.Valid(s) { // control bytes are refused, bad UTF-8 replaced: encoding/json's
			return nil, false
		}
	}
	d.i += j + 1
	return s, true
}

// number reads a JSON number's bytes; nil when what comes is not one (JSON's grammar: no
// leading zeros, no '+', no bare '.').
func (d *fastDecoder) number() []byte {
	j := d.i
	digits := func() int {
		k := j
		for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
			j++
		}
		return j - k
	}
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	lead := j
	if n := digits(); n == 0 || n > 1 && d.b[lead] == '0' {
		return nil
	}
	if j < len(d.b) && d.b[j] == '.' {
		j++
		if digits() == 0 {
			return nil
		}
	}
	if j < len(d.b) && (d.b[j] == 'e' || d.b[j] == 'E') {
		j++
		if j < len(d.b) && (d.b[j] == '+' || d.b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return nil
		}
	}
	n := d.b[d.i:j]
	d.i = j
	return n
}

func (d *fastDecoder) int() (int, bool) {
	n := d.number()
	if n == nil || bytes.ContainsAny(n, ".eE") {
		return 0, false
	}
	i, err := strconv.Atoi(string(n))
	return i, err == nil
}

func (d *fastDecoder) float() (float64, bool) {
	n := d.number()
	if n == nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil
}

func (d *fastDecoder) bool() (bool, bool) {
	switch {
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		d.i += 4
		return true, true
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		d.i += 5
		return false, true
	}
	return false, false
}

func (d *fastDecoder) time() (time.Time, bool) {
	s, ok := d.str()
	if !ok {
		return time.Time{}, false
	}
	if t, ok := parseUTC(s); ok {
		return t, true
	}
	t, err := time.Parse(time.RFC3339Nano, string(s))
	return t, err == nil
}

// parseUTC reads the times a driver writes, 2006-01-02T15:04:05[.fraction]Z, ten times faster
// than time.Parse; false for any other shape (time.Parse reads those).
func parseUTC(s []byte) (time.Time, bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[len(s)-1] != 'Z' {
		return time.Time{}, false
	}
	num := func(b []byte) int {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(s[0:4]), num(s[5:7]), num(s[8:10])
	hour, minute, sec := num(s[11:13]), num(s[14:16]), num(s[17:19])
	nsec := 0
	switch frac := s[19 : len(s)-1]; {
	case len(frac) == 0:
	case len(frac) < 2 || len(frac) > 10 || frac[0] != '.':
		return time.Time{}, false
	default:
		if nsec = num(frac[1:]); nsec < 0 {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			nsec *= 10
		}
	}
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // the 31st of a 30-day month: time.Parse refuses it
		return time.Time{}, false
	}
	return t, true
}

func (d *fastDecoder) strings() ([]string, bool) {
	if !d.byte('[') {
		return nil, false
	}
	out := []string{}
	if d.byte(']') {
		return out, true
	}
	for {
		s, ok := d.str()
		if !ok {
			return nil, false
		}
		out = append(out, string(s))
		if d.byte(',') {
			continue
		}
		return out, d.byte(']')
	}
}

func (d *fastDecoder) metrics() (map[string]float64, bool) {
	if !d.byte('{') {
		return nil, false
	}
	out := map[string]float64{}
	if d.byte('}') {
		return out, true
	}
	for {
		k, ok := d.str()
		if !ok || !d.byte(':') {
			return nil, false
		}
		v, ok := d.float()
		if !ok {
			return nil, false
		}
		out[d.intern(k)] = v
		if d.byte(',') {
			continue
		}
		return out, d.byte('}')
	}
}

// kindOf is s as its Kind constant, so that a record's kind shares the constant's string.
func kindOf(s []byte) Kind {
	switch string(s) {
	case string(EvStart):
		return EvStart
	case string(EvTrial):
		return EvTrial
	case string(EvNodeUp):
		return EvNodeUp
	case string(EvNodeOff):
		return EvNodeOff
	case string(EvInterrupt):
		return EvInterrupt
	case string(EvStage):
		return EvStage
	case string(EvLaunch):
		return EvLaunch
	case string(EvReport):
		return EvReport
	case string(EvDone):
		return EvDone
	case string(EvFail):
		return EvFail
	case string(EvTimeout):
		return EvTimeout
	case string(EvSync):
		return EvSync
	case string(EvResume):
		return EvResume
	case string(EvSpec):
		return EvSpec
	case string(EvCancel):
		return EvCancel
	case string(EvFinish):
		return EvFinish
	case string(EvStop):
		return EvStop
	case string(EvRequest):
		return EvRequest
	case string(EvAnswer):
		return EvAnswer
	case string(EvReplan):
		return EvReplan
	case string(EvForecast):
		return EvForecast
	case string(EvPromote):
		return EvPromote
	case string(EvPhase):
		return EvPhase
	}
	return Kind(s)
}

// field reads key's value into e; false for a key it leaves to encoding/json.
func (d *fastDecoder) field(key []byte, e *Event) bool {
	if d.peek('n') { // null: leave it to encoding/json, which knows what null does to each field
		return false
	}
	ok := true
	str := func(dst *string) {
		var s []byte
		if s, ok = d.str(); ok {
			*dst = string(s)
		}
	}
	num := func(dst *int) { *dst, ok = d.int() }
	flag := func(dst *bool) { *dst, ok = d.bool() }
	switch string(key) {
	case "crc":
		_, ok = d.str()
	case "ev":
		var s []byte
		if s, ok = d.str(); ok {
			e.Ev = kindOf(s)
		}
	case "at":
		e.At, ok = d.time()
	case "began":
		e.Began, ok = d.time()
	case "exited":
		e.Exited, ok = d.time()
	case "run_id":
		str(&e.RunID)
	case "trial":
		str(&e.Trial)
	case "error":
		str(&e.Error)
	case "spec":
		str(&e.Spec)
	case "token":
		str(&e.Token)
	case "market":
		str(&e.Market)
	case "tier":
		str(&e.Tier)
	case "reason":
		str(&e.Reason)
	case "cause":
		str(&e.Cause)
	case "fault":
		str(&e.Fault)
	case "where":
		str(&e.Where)
	case "bracket":
		num(&e.Bracket)
	case "stage":
		num(&e.Stage)
	case "phase":
		num(&e.Phase)
	case "try":
		num(&e.Try)
	case "gpus":
		num(&e.GPUs)
	case "iter":
		num(&e.Iter)
	case "count":
		num(&e.Count)
	case "gave_up":
		flag(&e.GaveUp)
	case "interrupted":
		flag(&e.Interrupted)
	case "not_started":
		flag(&e.NotStarted)
	case "draining":
		flag(&e.Draining)
	case "deadline_gives_way":
		flag(&e.GivesWay)
	case "seconds":
		e.Seconds, ok = d.float()
	case "metric":
		var f float64
		if f, ok = d.float(); ok {
			e.Metric = &f
		}
	case "metrics":
		e.Metrics, ok = d.metrics()
	case "nodes":
		e.Nodes, ok = d.strings()
	case "keep":
		e.Keep, ok = d.strings()
	default:
		return false
	}
	return ok
}
