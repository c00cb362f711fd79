package ec2

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// maxParallelLaunches bounds the RunInstances in flight for one Create; maxErrors the node
// errors a Create's error spells out.
const (
	maxParallelLaunches = 8
	maxErrors           = 3
)

// launch is one node of a Create, from its plan to its end.
type launch struct {
	index    int
	key      string // the request's token
	token    string
	name     string
	kind     Kind   // the instance type it rents, its GPUs and prices
	userData string // base64
	unsure   bool   // a RunInstances got no definite answer: EC2 may hold an instance under token
	id       string // the instance, once rented
	market   cloud.Market
	rented   types.Instance // as RunInstances (or the token's lookup) gave it
	inst     types.Instance // as last described
	running  time.Time
	ready    bool
	err      error
}

// Create rents req.Count instances, one RunInstances each, and returns those that run and are
// ready. On any failure it returns those with the error, after terminating every other instance
// it started (nothing is left that the caller does not know of).
func (p *Provider) Create(ctx context.Context, req cloud.Request) ([]cloud.Node, error) {
	kind, market, err := p.check(req)
	if err != nil || req.Count <= 0 {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ec2: create nodes: %w", err)
	}
	key := req.Token
	if key == "" {
		key = randomKey()
	}
	nodes := make([]*launch, req.Count)
	for i := range nodes {
		if nodes[i], err = p.plan(key, i, kind); err != nil {
			return nil, fmt.Errorf("ec2: create nodes: %w", err)
		}
	}
	p.launchAll(ctx, nodes, market)
	p.waitRunning(ctx, nodes)
	p.readyAll(ctx, nodes)
	cleanupErr := p.cleanup(ctx, nodes)

	var out []cloud.Node
	var errs []error
	seen, more := map[string]bool{}, 0
	for _, n := range nodes {
		switch {
		case n.ready:
			out = append(out, p.node(n.inst, n.running))
		case n.err == nil || seen[n.err.Error()]:
		case len(errs) >= maxErrors && !errors.As(n.err, new(*cloud.CapacityError)):
			more++ // many nodes that fail alike are said once; a typed error is always kept
		default:
			seen[n.err.Error()] = true
			errs = append(errs, n.err)
		}
	}
	if more > 0 {
		errs = append(errs, fmt.Errorf("and %d more node(s) failed", more))
	}
	if ctx.Err() != nil && !errors.Is(errors.Join(errs...), ctx.Err()) {
		errs = append(errs, ctx.Err())
	}
	if cleanupErr != nil {
		errs = append(errs, cleanupErr)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("ec2: rented %d of %d %s nodes: %w", len(out), req.Count, kind.InstanceType, errors.Join(errs...))
	}
	return out, nil
}

// check is the kind and market a request rents (empty fields: the Config's own), or a
// *cloud.CapacityError for what this provider does not rent: a type the spec does not offer, or
// a market it has no price for.
func (p *Provider) check(req cloud.Request) (Kind, cloud.Market, error) {
	m := req.Market
	if m == "" {
		m = p.cfg.Market
	}
	typ := req.InstanceType
	if typ == "" {
		typ = p.cfg.InstanceType
	}
	refuse := func(why string) (Kind, cloud.Market, error) {
		return Kind{}, "", &cloud.CapacityError{InstanceType: typ, Market: m, Reason: why}
	}
	k, ok := p.kind(typ)
	switch {
	case !ok:
		names := make([]string, len(p.kinds))
		for i, k := range p.kinds {
			names[i] = k.InstanceType
		}
		return refuse(fmt.Sprintf("this provider rents only %s (the spec's instance types)", strings.Join(names, ", ")))
	case m != cloud.OnDemand && m != cloud.Spot:
		return refuse(fmt.Sprintf("EC2 markets are %s and %s", cloud.OnDemand, cloud.Spot))
	case m == cloud.Spot && k.SpotPrice == 0:
		return refuse(fmt.Sprintf("no spot price of %s is known to bill spot nodes at", typ))
	}
	return k, m, nil
}

// plan names node index of the request keyed key, of kind k, and renders its user-data: all of
// it before any money is spent.
func (p *Provider) plan(key string, index int, k Kind) (*launch, error) {
	n := &launch{index: index, key: key, token: clientToken(p.cfg.RunID, key, index), kind: k}
	n.name = nodeName(p.cfg.RunID, n.token)
	ud, err := p.userData(n.name, k)
	if err != nil {
		return nil, err
	}
	n.userData = ud
	return n, nil
}

// userData is the user-data of a node of kind k, base64-encoded as RunInstances takes it.
func (p *Provider) userData(node string, k Kind) (string, error) {
	script := p.cfg.EC2.UserData
	if p.cfg.UserData != nil {
		var err error
		if script, err = p.cfg.UserData(node, k); err != nil {
			return "", fmt.Errorf("render user-data of %s: %w", node, err)
		}
	}
	if len(script) > maxUserData {
		return "", fmt.Errorf("user-data of %s is %d bytes: EC2 takes at most %d", node, len(script), maxUserData)
	}
	if script == "" {
		return "", nil
	}
	return base64.StdEncoding.EncodeToString([]byte(script)), nil
}

// randomKey is a request key for a caller that journals none: it still keeps the SDK's own
// retries of one RunInstances from renting twice.
func randomKey() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}

// launchAll rents every node, a few at a time. The first node that cannot be rented stops the
// rest: the next ones would meet the same quota, capacity or refusal.
func (p *Provider) launchAll(ctx context.Context, nodes []*launch, market cloud.Market) {
	plan := attempts(p.cfg.EC2.Subnets, market, p.cfg.Spot.Fallback)
	var stop atomic.Bool
	next := make(chan *launch)
	var wg sync.WaitGroup
	for range min(len(nodes), maxParallelLaunches) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				if stop.Load() || ctx.Err() != nil {
					continue // not tried: the error that stopped it is the Create's
				}
				if n.err = p.launch(ctx, n, plan, market); n.err != nil {
					stop.Store(true)
				}
			}
		}()
	}
	for _, n := range nodes {
		next <- n
	}
	close(next)
	wg.Wait()
}

// launch rents one node, trying plan in order.
func (p *Provider) launch(ctx context.Context, n *launch, plan []attempt, asked cloud.Market) error {
	var fails []failure
	for _, a := range plan {
		out, err := p.ec2.RunInstances(ctx, p.runInput(n, a))
		if err == nil {
			if len(out.Instances) != 1 {
				return fmt.Errorf("node %s: RunInstances answered %d instances, want 1", n.name, len(out.Instances))
			}
			n.setRented(out.Instances[0])
			if len(fails) > 0 && p.cfg.Log != nil {
				fmt.Fprintf(p.cfg.Log, "node %s: rented %s in %s after %s\n", n.name, a.market, a.subnet, describeFails(fails))
			}
			return nil
		}
		code := apiCode(err)
		switch classify(code) {
		case kindCapacity:
			fails = append(fails, failure{a, code, apiMessage(err)})
			continue
		case kindQuota:
			return quotaError(n.kind.InstanceType, a.market, code, apiMessage(err))
		case kindMismatch:
			return p.adopt(ctx, n)
		}
		n.unsure = !definite(err)
		return fmt.Errorf("node %s: rent %s %s in %s: %w", n.name, a.market, n.kind.InstanceType, a.subnet, err)
	}
	return capacityError(n.kind.InstanceType, asked, fails)
}

// adopt takes the instance an earlier request rented under n's token with other parameters
// (another subnet or market after a capacity error, a resumed driver's replay).
func (p *Provider) adopt(ctx context.Context, n *launch) error {
	found, err := p.describe(ctx, filter("client-token", n.token), filter("tag:"+TagRun, p.cfg.RunID))
	if err != nil {
		n.unsure = true
		return fmt.Errorf("node %s: find the instance of token %s: %w", n.name, n.token, err)
	}
	for _, in := range found {
		if s := in.State; s != nil && (s.Name == types.InstanceStateNamePending || s.Name == types.InstanceStateNameRunning) {
			n.setRented(in)
			return nil
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("node %s: instance %s, rented earlier under token %s, has ended (%s): a repeated request cannot rent again; use a new token",
			n.name, aws.ToString(found[0].InstanceId), n.token, stateName(found[0]))
	}
	return fmt.Errorf("node %s: token %s was used with other parameters, and no instance of this run carries it", n.name, n.token)
}

func (n *launch) setRented(in types.Instance) {
	n.rented, n.inst, n.id, n.market = in, in, aws.ToString(in.InstanceId), marketOf(in)
}

// definite: err is EC2's answer that it rented nothing (a client error, 4xx). No answer (a
// cancelled context, a lost connection) or a server error may hide a rented instance.
func definite(err error) bool {
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500
}

func stateName(in types.Instance) string {
	if in.State == nil {
		return "unknown"
	}
	return string(in.State.Name)
}

// runInput is the RunInstances of node n in a: one instance that terminates when its OS shuts
// down (a watchdog's shutdown ends the billing), tagged on instance and volume.
func (p *Provider) runInput(n *launch, a attempt) *ec2.RunInstancesInput {
	x := p.cfg.EC2
	var tv []types.Tag
	for _, kv := range append(tags(p.cfg.Experiment, p.cfg.RunID, n.name, n.kind, a.market, x.Tags), [2]string{TagRequest, n.key}) {
		tv = append(tv, types.Tag{Key: aws.String(kv[0]), Value: aws.String(kv[1])})
	}
	in := &ec2.RunInstancesInput{
		ImageId:                           aws.String(x.AMI),
		InstanceType:                      types.InstanceType(n.kind.InstanceType),
		MinCount:                          aws.Int32(1),
		MaxCount:                          aws.Int32(1),
		SubnetId:                          aws.String(a.subnet),
		ClientToken:                       aws.String(n.token),
		InstanceInitiatedShutdownBehavior: types.ShutdownBehaviorTerminate,
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: tv},
			{ResourceType: types.ResourceTypeVolume, Tags: tv},
		},
		// IMDSv2 only: the on-node worker reads spot notices through it.
		MetadataOptions: &types.InstanceMetadataOptionsRequest{HttpTokens: types.HttpTokensStateRequired,
			HttpEndpoint: types.InstanceMetadataEndpointStateEnabled},
	}
	// The spec's groups, and the run's own beside them once made: with neither, the VPC's
	// default group.
	in.SecurityGroupIds = slices.Clone(x.SecurityGroups)
	if g := p.ownGroup(); g != "" {
		in.SecurityGroupIds = append(in.SecurityGroupIds, g)
	}
	if x.KeyName != "" {
		in.KeyName = aws.String(x.KeyName)
	}
	if x.InstanceProfile != "" {
		if strings.HasPrefix(x.InstanceProfile, "arn:") {
			in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Arn: aws.String(x.InstanceProfile)}
		} else {
			in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: aws.String(x.InstanceProfile)}
		}
		// A container behind Nomad's bridge network is one hop further from IMDS than its
		// instance: with EC2's default limit of 1 it would get no token, so no role
		// credentials.
		in.MetadataOptions.HttpPutResponseHopLimit = aws.Int32(2)
	}
	if n.userData != "" {
		in.UserData = aws.String(n.userData)
	}
	if a.market == cloud.Spot {
		// No MaxPrice: EC2 caps a spot price at the on-demand one.
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot,
			SpotOptions: &types.SpotMarketOptions{SpotInstanceType: types.SpotInstanceTypeOneTime,
				InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate}}
	}
	return in
}
