package ec2

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/smithy-go"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// Provider rents a run's nodes as EC2 instances. Its methods are safe for concurrent use; it
// keeps no state of its own (EC2's tags are the state), so a Provider opened with the same
// run ID finds what another rented, and CreateGroup the run's security group.
type Provider struct {
	cfg    Config
	kinds  []Kind // what it rents, the Config's own type first
	ec2    *ec2.Client
	quotas *servicequotas.Client

	mu    sync.Mutex
	group string // the run's security group, once CreateGroup made or found it
}

var _ cloud.Provider = (*Provider)(nil)

// New checks cfg and builds the SDK clients; it makes no call to AWS.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var ac aws.Config
	if cfg.AWS != nil {
		ac = cfg.AWS.Copy()
		if cfg.EC2.Region != "" {
			ac.Region = cfg.EC2.Region
		}
		if ac.Retryer == nil {
			ac.Retryer = func() aws.Retryer { return newRetryer(cfg.MaxBackoff) }
		}
	} else {
		opts := []func(*config.LoadOptions) error{
			config.WithRetryer(func() aws.Retryer { return newRetryer(cfg.MaxBackoff) }),
		}
		if cfg.EC2.Region != "" {
			opts = append(opts, config.WithRegion(cfg.EC2.Region))
		}
		// The SDK keeps its own buildable HTTP client: a plain *http.Client fails where
		// AWS_CA_BUNDLE is set.
		if ac, err = config.LoadDefaultConfig(ctx, opts...); err != nil {
			return nil, fmt.Errorf("ec2: load AWS configuration: %w", err)
		}
	}
	if ac.Region == "" {
		return nil, errors.New("ec2: no AWS region: set cluster.ec2.region, AWS_REGION or the shared config's region")
	}
	return &Provider{cfg: cfg, kinds: cfg.kinds(), ec2: ec2.NewFromConfig(ac), quotas: servicequotas.NewFromConfig(ac)}, nil
}

// newRetryer is the SDK's adaptive retryer (it slows every caller down when EC2 throttles),
// with more attempts, and without retries of capacity errors in place.
func newRetryer(maxBackoff time.Duration) aws.Retryer {
	return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
		o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) {
			so.MaxAttempts = maxAttempts
			if maxBackoff > 0 {
				so.MaxBackoff = maxBackoff
			}
			so.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(noCapacityRetry)}, so.Retryables...)
		})
	})
}

// noCapacityRetry: InsufficientInstanceCapacity is an HTTP 500, which the SDK retries in the
// same zone; the next subnet is the better retry.
func noCapacityRetry(err error) aws.Ternary {
	if classify(apiCode(err)) == kindCapacity {
		return aws.FalseTernary
	}
	return aws.UnknownTernary
}

// apiCode is an AWS error's code, "" when err is not an answer from AWS (a cancelled context,
// a lost connection).
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func apiMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	return err.Error()
}

// Live instance states: what the run holds, billing or about to.
var liveStates = []string{string(types.InstanceStateNamePending), string(types.InstanceStateNameRunning)}

// List returns the run's pending and running instances. A pending one has RunningAt zero (it
// does not bill yet); a running one has its LaunchTime (see the package doc).
func (p *Provider) List(ctx context.Context) ([]cloud.Node, error) {
	insts, err := p.describe(ctx, filter("tag:"+TagRun, p.cfg.RunID), filter("instance-state-name", liveStates...))
	if err != nil {
		return nil, fmt.Errorf("ec2: list nodes: %w", err)
	}
	out := make([]cloud.Node, 0, len(insts))
	for _, in := range insts {
		n := p.node(in, time.Time{})
		if in.State != nil && in.State.Name == types.InstanceStateNameRunning && in.LaunchTime != nil {
			n.RunningAt = *in.LaunchTime
		}
		out = append(out, n)
	}
	return out, nil
}

// node is an instance as a node, running since runningAt: its type is the instance's, its
// market the one it was actually rented on, its GPUs and price its kind's. An instance of a type
// this provider no longer rents (a run resumed with another spec) keeps what its tags say it was
// rented with, so that it is still billed and placed right until it is released.
func (p *Provider) node(in types.Instance, runningAt time.Time) cloud.Node {
	m := marketOf(in)
	n := cloud.Node{ID: aws.ToString(in.InstanceId), Addr: aws.ToString(in.PrivateIpAddress),
		RunningAt: runningAt, InstanceType: string(in.InstanceType), Market: m}
	if in.Placement != nil {
		n.Zone = aws.ToString(in.Placement.AvailabilityZone)
	}
	for _, t := range in.Tags {
		if aws.ToString(t.Key) == TagRequest {
			n.Token = aws.ToString(t.Value)
		}
	}
	if k, ok := p.kind(n.InstanceType); ok {
		n.GPUs, n.PricePerHour = k.GPUsPerNode, k.price(m)
		return n
	}
	for _, t := range in.Tags {
		switch aws.ToString(t.Key) {
		case TagGPUs:
			n.GPUs, _ = strconv.Atoi(aws.ToString(t.Value))
		case TagPrice:
			n.PricePerHour, _ = strconv.ParseFloat(aws.ToString(t.Value), 64)
		}
	}
	return n
}

// kind is the kind of instance type typ, if this provider rents it.
func (p *Provider) kind(typ string) (Kind, bool) {
	for _, k := range p.kinds {
		if k.InstanceType == typ {
			return k, true
		}
	}
	return Kind{}, false
}

// marketOf is the market an instance was actually rented on.
func marketOf(in types.Instance) cloud.Market {
	if in.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
		return cloud.Spot
	}
	return cloud.OnDemand
}

func filter(name string, values ...string) types.Filter {
	return types.Filter{Name: aws.String(name), Values: values}
}

// describe is every instance matching filters, all pages.
func (p *Provider) describe(ctx context.Context, filters ...types.Filter) ([]types.Instance, error) {
	pages := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(1000)})
	var out []types.Instance
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			out = append(out, r.Instances...)
		}
	}
	return out, nil
}
