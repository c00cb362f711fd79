package ec2

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/spec"
)

// The pure half of the provider: where to try, what to call things, what an answer means.

// attempt is one RunInstances try: a subnet and a market.
type attempt struct {
	subnet string
	market cloud.Market
}

// attempts is the order a node is tried in: every subnet in the spec's order on the market
// asked for, then, for spot with fallback on-demand, every subnet again on-demand.
func attempts(subnets []string, market cloud.Market, fallback string) []attempt {
	var out []attempt
	for _, s := range subnets {
		out = append(out, attempt{s, market})
	}
	if market == cloud.Spot && fallback == spec.FallbackOnDemand {
		for _, s := range subnets {
			out = append(out, attempt{s, cloud.OnDemand})
		}
	}
	return out
}

// maxClientToken is EC2's limit on a ClientToken (ASCII characters).
const maxClientToken = 64

// clientToken is node index's RunInstances token in the request keyed key of run: the same
// three always give the same token, and the run ID keeps two runs that reuse a key apart
// (tokens are unique per account and region). Past 64 characters, or not printable ASCII,
// it is a hash.
func clientToken(run, key string, index int) string {
	raw := fmt.Sprintf("%s-%s-%d", run, key, index)
	if len(raw) <= maxClientToken && printableASCII(raw) {
		return raw
	}
	sum := sha256.Sum256([]byte(raw))
	return "rb-" + hex.EncodeToString(sum[:])[:40]
}

func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// nodeName names the node rented under token: derived from it, so that a repeated request
// tags and renders the same node (a counter would restart with a resumed driver).
func nodeName(run, token string) string {
	sum := sha256.Sum256([]byte(token))
	return run + "-n" + hex.EncodeToString(sum[:])[:8]
}

// Tag keys rubberband sets on every instance and volume (experiment and run also on the run's
// security group).
const (
	TagExperiment = "rubberband:experiment"
	TagRun        = "rubberband:run"
	TagNode       = "rubberband:node"
	// TagGPUs and TagPrice are the GPUs per node and the hourly price (dollars) the node was
	// rented with: what List reports of an instance whose type the provider no longer rents.
	TagGPUs  = "rubberband:gpus"
	TagPrice = "rubberband:price-per-hour"
	// TagRequest is the request token (cloud.Request.Token) the instance was rented under.
	TagRequest = "rubberband:request"
	tagName    = "Name"
)

// tags are a node's tags: rubberband's, what it was rented as (kind k on market m), then the
// spec's extras by key (a stable order keeps a repeated request identical).
func tags(experiment, run, node string, k Kind, m cloud.Market, extra map[string]string) [][2]string {
	return withExtra([][2]string{{TagExperiment, experiment}, {TagRun, run}, {TagNode, node}, {tagName, node},
		{TagGPUs, strconv.Itoa(k.GPUsPerNode)}, {TagPrice, strconv.FormatFloat(k.price(m), 'g', -1, 64)}}, extra)
}

// withExtra is rubberband's tags, then the spec's extras by key (a stable order keeps a
// repeated request identical).
func withExtra(own [][2]string, extra map[string]string) [][2]string {
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		own = append(own, [2]string{k, extra[k]})
	}
	return own
}

// kind is what an EC2 error code means for a node being rented.
type kind int

const (
	kindOther    kind = iota // stop: the request itself is wrong or not allowed
	kindCapacity             // try the next subnet or market
	kindQuota                // stop: only a person can raise the quota
	kindMismatch             // the token was used with other parameters: find what it rented
)

func classify(code string) kind {
	switch code {
	case "InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
		"InsufficientAddressCapacity", "InsufficientFreeAddressesInSubnet",
		"SpotMaxPriceTooLow", "MaxSpotInstanceCountExceeded", "Unsupported":
		return kindCapacity
	case "VcpuLimitExceeded", "InstanceLimitExceeded":
		return kindQuota
	case "IdempotentParameterMismatch":
		return kindMismatch
	}
	return kindOther
}

// failure is one attempt that found no capacity.
type failure struct {
	attempt
	code, msg string
}

// capacityError says why no attempt rented: the type, the market asked for, the subnets tried
// (on EC2 a zone is named by its subnet: the spec gives one per zone) and AWS's codes.
func capacityError(typ string, market cloud.Market, fails []failure) *cloud.CapacityError {
	var subnets []string
	for _, f := range fails {
		if !slices.Contains(subnets, f.subnet) {
			subnets = append(subnets, f.subnet)
		}
	}
	return &cloud.CapacityError{InstanceType: typ, Market: market, Zone: "subnets " + strings.Join(subnets, ", "),
		Reason: describeFails(fails)}
}

// describeFails is what each failed attempt met: "spot subnet-1: InsufficientInstanceCapacity; ...".
func describeFails(fails []failure) string {
	reasons := make([]string, len(fails))
	for i, f := range fails {
		reasons[i] = fmt.Sprintf("%s %s: %s", f.market, f.subnet, f.code)
	}
	return strings.Join(reasons, "; ")
}

// quota is a vCPU quota of Service Quotas (service code ec2).
type quota struct{ code, name string }

// quotaFor is the vCPU quota an instance type counts against on a market; ok is false for a
// family whose quota this package does not know (Inferentia, Trainium, F, X, ...).
func quotaFor(instanceType string, market cloud.Market) (q quota, ok bool) {
	family, _, _ := strings.Cut(strings.ToLower(instanceType), ".")
	spot := market == cloud.Spot
	pick := func(onDemand, spotQ quota) (quota, bool) {
		if spot {
			return spotQ, true
		}
		return onDemand, true
	}
	switch {
	case family == "" || strings.HasPrefix(family, "inf") || strings.HasPrefix(family, "trn") ||
		strings.HasPrefix(family, "dl") || strings.HasPrefix(family, "hpc") || strings.HasPrefix(family, "mac") ||
		strings.HasPrefix(family, "u-"):
		return quota{}, false
	case family[0] == 'p':
		return pick(quota{"L-417A185B", "Running On-Demand P instances"}, quota{"L-7212CCBC", "All P Spot Instance Requests"})
	case family[0] == 'g' || strings.HasPrefix(family, "vt"):
		return pick(quota{"L-DB2E81BA", "Running On-Demand G and VT instances"}, quota{"L-3819A6DF", "All G and VT Spot Instance Requests"})
	case strings.ContainsRune("acdhimrtz", rune(family[0])):
		return pick(quota{"L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"},
			quota{"L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"})
	}
	return quota{}, false
}

// quotaError is what VcpuLimitExceeded means: a quota only a person can raise.
func quotaError(typ string, market cloud.Market, code, msg string) error {
	what := "the account's vCPU quota"
	if q, ok := quotaFor(typ, market); ok {
		what = fmt.Sprintf("vCPU quota %s (%s)", q.code, q.name)
	}
	return fmt.Errorf("%s %s: %s is exhausted; ask AWS to raise it in Service Quotas (%s: %s)", market, typ, what, code, msg)
}
