package ec2sim

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// params reads EC2 Query parameters, whose lists are flattened: Name.1, Name.2, ... and
// Name.1.Member for lists of structures.
type params struct{ url.Values }

// flat is the form as one value per key, without Action and Version.
func (p params) flat() map[string]string {
	m := map[string]string{}
	for k, v := range p.Values {
		if k != "Action" && k != "Version" && len(v) > 0 {
			m[k] = v[0]
		}
	}
	return m
}

// indices are the list indices present under prefix (prefix.N or prefix.N.x), in order.
func (p params) indices(prefix string) []int {
	seen := map[int]bool{}
	for k := range p.Values {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(num); err == nil && n > 0 {
			seen[n] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// list is a flattened list of strings.
func (p params) list(prefix string) []string {
	var out []string
	for _, n := range p.indices(prefix) {
		out = append(out, p.Get(fmt.Sprintf("%s.%d", prefix, n)))
	}
	return out
}

func (p params) integer(key string, def int) (int, error) {
	v := p.Get(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, ec2Err("InvalidParameterValue", "Invalid value '%s' for %s: not an integer.", v, key)
	}
	return n, nil
}

func (p params) boolean(key string) (bool, error) {
	v := p.Get(key)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, ec2Err("InvalidParameterValue", "Invalid value '%s' for %s: not a boolean.", v, key)
	}
	return b, nil
}

// filter is one Filter.N: a name and the values any of which matches.
type filter struct {
	name   string
	values []string
}

func (p params) filters() []filter {
	var out []filter
	for _, n := range p.indices("Filter") {
		pre := fmt.Sprintf("Filter.%d", n)
		out = append(out, filter{name: p.Get(pre + ".Name"), values: p.list(pre + ".Value")})
	}
	return out
}

// tags reads prefix.N.Key and prefix.N.Value.
func (p params) tags(prefix string) ([]tag, error) {
	var out []tag
	for _, n := range p.indices(prefix) {
		pre := fmt.Sprintf("%s.%d", prefix, n)
		t := tag{Key: p.Get(pre + ".Key"), Value: p.Get(pre + ".Value")}
		if err := t.check(); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

type tag struct{ Key, Value string }

func (t tag) check() error {
	switch {
	case t.Key == "" || len([]rune(t.Key)) > 128:
		return ec2Err("InvalidParameterValue", "Tag key must be 1 to 128 characters long; got %q.", t.Key)
	case len([]rune(t.Value)) > 256:
		return ec2Err("InvalidParameterValue", "Tag value for key %q exceeds 256 characters.", t.Key)
	case strings.HasPrefix(strings.ToLower(t.Key), "aws:"):
		return ec2Err("InvalidParameterValue", "Value ( %s ) for parameter key is invalid. Tag keys starting with 'aws:' are reserved for internal use", t.Key)
	}
	return nil
}

// maxTags is EC2's limit of tags on one resource.
const maxTags = 50

// applyTags sets tags on a resource's tag map, within EC2's limit.
func applyTags(dst map[string]string, tags []tag) error {
	n := len(dst)
	for _, t := range tags {
		if _, ok := dst[t.Key]; !ok {
			n++
		}
	}
	if n > maxTags {
		return ec2Err("TagLimitExceeded", "The maximum number of Tags for a resource has been reached (%d).", maxTags)
	}
	for _, t := range tags {
		dst[t.Key] = t.Value
	}
	return nil
}

// glob matches EC2 filter values, where * is any run of characters and ? one character.
func glob(pattern, s string) bool {
	p, r := []rune(pattern), []rune(s)
	var match func(i, j int) bool
	match = func(i, j int) bool {
		for i < len(p) {
			switch p[i] {
			case '*':
				for k := j; k <= len(r); k++ {
					if match(i+1, k) {
						return true
					}
				}
				return false
			case '?':
				if j >= len(r) {
					return false
				}
			default:
				if j >= len(r) || p[i] != r[j] {
					return false
				}
			}
			i++
			j++
		}
		return j == len(r)
	}
	return match(0, 0)
}

func anyGlob(patterns []string, s string) bool {
	for _, pat := range patterns {
		if glob(pat, s) {
			return true
		}
	}
	return false
}

// ec2Time is how EC2 writes a time.
func ec2Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// pageToken is an opaque NextToken for a position in a listing (each listing says what its
// positions are). The check digits make the fake refuse a token it did not make, as EC2 does.
func pageToken(pos int) string {
	return fmt.Sprintf("%x.%s", pos, strconv.FormatInt(int64(pos)*7919+13, 36))
}

// dryRun is the answer to a request whose DryRun is set (it would have succeeded), nil when it
// is not set: for actions that check nothing else before acting.
func (p params) dryRun() error {
	dry, err := p.boolean("DryRun")
	if err != nil {
		return err
	}
	if dry {
		return dryRunOK()
	}
	return nil
}

// dryRunOK is how EC2 answers a dry run that would have succeeded.
func dryRunOK() error {
	return ec2Err("DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
}

// nextToken is the listing position the request's NextToken names (0 without one).
// paging reads a Describe call's MaxResults and NextToken as EC2 checks them: MaxResults from 5
// to 1000, and never beside an explicit list of IDs (set names that list in the error), and a
// NextToken this fake made. A DryRun is answered after them, as EC2 does.
func (p params) paging(set string, explicit bool) (max, after int, err error) {
	if max, err = p.integer("MaxResults", 0); err != nil {
		return 0, 0, err
	}
	if p.Get("MaxResults") != "" {
		if explicit {
			return 0, 0, ec2Err("InvalidParameterCombination", "The parameter %s cannot be used with the parameter maxResults", set)
		}
		if max < 5 || max > 1000 {
			return 0, 0, ec2Err("InvalidParameterValue", "Value ( %d ) for parameter maxResults is invalid. Expecting a value between 5 and 1000.", max)
		}
	}
	if after, err = p.nextToken(); err != nil {
		return 0, 0, err
	}
	return max, after, p.dryRun()
}

func (p params) nextToken() (int, error) {
	pos, ok := readPageToken(p.Get("NextToken"))
	if !ok {
		return 0, ec2Err("InvalidPaginationToken", "Invalid pagination token: %q", p.Get("NextToken"))
	}
	return pos, nil
}

// readPageToken checks a NextToken made by pageToken.
func readPageToken(tok string) (int, bool) {
	if tok == "" {
		return 0, true
	}
	hex, check, ok := strings.Cut(tok, ".")
	if !ok {
		return 0, false
	}
	pos, err := strconv.ParseInt(hex, 16, 64)
	if err != nil || pos < 0 || check != strconv.FormatInt(pos*7919+13, 36) {
		return 0, false
	}
	return int(pos), true
}
