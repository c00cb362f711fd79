package ec2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Config is what a Provider rents and how.
type Config struct {
	// Experiment is the spec's name and RunID the run's ID: tags rubberband:experiment and
	// rubberband:run. List finds the run's instances by RunID.
	Experiment string
	RunID      string
	// InstanceType is cluster.instance_type: what a request that names no type rents;
	// GPUsPerNode is what each of its nodes reports (and its node agent is told).
	InstanceType string
	GPUsPerNode  int
	// Market is what a request that names none rents (empty: on-demand).
	Market cloud.Market
	// OnDemandPrice and SpotPrice are dollars an hour: what nodes of InstanceType are stamped
	// with for the cost meter, by the market each was actually rented on.
	OnDemandPrice float64
	SpotPrice     float64
	// More are the other instance types it rents (the spec's other cluster.instance_types): a
	// request names the one it wants. The Config's own type is the first kind, so that one
	// type alone is a set of one, rented by the same code.
	More []Kind
	// EC2 is the spec's cluster.ec2 block. Its UserData is not added by the provider: see
	// UserData.
	EC2 spec.EC2
	// Spot is the spec's cluster.spot block; only Fallback is read (empty: on-demand).
	Spot spec.Spot
	// UserData renders the script an instance boots with, given its node name and kind (its
	// GPUs per node: the node agent fingerprints that many for Nomad); it must include the
	// spec's extra user-data where its script can run it (only the renderer knows where: before
	// an agent that runs in the foreground). Nil: the spec's extra user-data alone. It should be
	// deterministic: a repeated request then sends exactly the first one's.
	UserData func(node string, kind Kind) (string, error)
	// Ready is what Create waits for after an instance runs (the CLI: its Nomad client is
	// ready). Nil: running is ready.
	Ready func(ctx context.Context, instanceID string) error
	// Drain is called by Delete with the instances it is about to terminate, while they still
	// run (the CLI: drain their Nomad nodes, so that nothing new is placed there). Best effort:
	// an instance is terminated all the same, since billing must stop. Nil: none.
	Drain func(ctx context.Context, instanceIDs []string)
	// Log, when set, hears what the caller should know and no error says: a request that fell
	// over to another zone or market, and why.
	Log io.Writer
	// Clock stamps RunningAt (default time.Now).
	Clock func() time.Time
	// AWS is the SDK configuration to use as is; nil loads the default chain
	// (config.LoadDefaultConfig) with EC2.Region and the adaptive retryer.
	AWS *aws.Config
	// PollInterval is the first wait between DescribeInstances while instances boot (default
	// 1 s); it grows to 4 times that.
	PollInterval time.Duration
	// BootTimeout bounds how long an instance may stay pending (default 10 min): one stuck
	// in pending is terminated and its node fails.
	BootTimeout time.Duration
	// MaxBackoff bounds the retryer's wait between attempts (0: the SDK's 20 s).
	MaxBackoff time.Duration
	// DriverCIDRs are the addresses (CIDR blocks) that may reach Nomad's ports on the run's
	// instances besides the instances themselves: the driver's Nomad server (CreateGroup).
	DriverCIDRs []string
	// GroupTimeout bounds how long DeleteGroup waits for the run's last instances to let go of
	// its security group (default DefaultGroupTimeout).
	GroupTimeout time.Duration
}

// Kind is one instance type a Provider rents: what its nodes report and cost an hour on each
// market (dollars; a zero SpotPrice: it is not rented on spot, the meter would bill it nothing).
type Kind struct {
	InstanceType  string
	GPUsPerNode   int
	OnDemandPrice float64
	SpotPrice     float64
}

// price is what a node of the kind costs an hour on market m.
func (k Kind) price(m cloud.Market) float64 {
	if m == cloud.Spot {
		return k.SpotPrice
	}
	return k.OnDemandPrice
}

// kinds are the types the Config rents, its own first.
func (c Config) kinds() []Kind {
	own := Kind{InstanceType: c.InstanceType, GPUsPerNode: c.GPUsPerNode, OnDemandPrice: c.OnDemandPrice, SpotPrice: c.SpotPrice}
	return append([]Kind{own}, c.More...)
}

// Defaults.
const (
	DefaultPollInterval = time.Second
	DefaultBootTimeout  = 10 * time.Minute
	// maxUserData is EC2's limit on user-data before base64.
	maxUserData = 16 << 10
	// maxAttempts is the retryer's attempts per call: throttling under a burst of nodes
	// needs more than the SDK's 3.
	maxAttempts = 6
)

func (c Config) withDefaults() (Config, error) {
	if c.Market == "" {
		c.Market = cloud.OnDemand
	}
	if c.Spot.Fallback == "" {
		c.Spot.Fallback = spec.FallbackOnDemand
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.BootTimeout <= 0 {
		c.BootTimeout = DefaultBootTimeout
	}
	if c.GroupTimeout <= 0 {
		c.GroupTimeout = DefaultGroupTimeout
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.RunID == "" {
		bad("no run ID: instances are found by it")
	}
	if c.InstanceType == "" {
		bad("no instance type")
	}
	if c.EC2.AMI == "" {
		bad("no AMI (cluster.ec2.ami)")
	}
	if len(c.EC2.Subnets) == 0 {
		bad("no subnet (cluster.ec2.subnets)")
	}
	seen := map[string]bool{}
	for i, k := range c.kinds() {
		switch {
		case i > 0 && k.InstanceType == "":
			bad("kind %d of More has no instance type", i-1)
		case seen[k.InstanceType]:
			bad("instance type %s is given twice", k.InstanceType)
		}
		seen[k.InstanceType] = true
		if k.GPUsPerNode < 0 || k.OnDemandPrice < 0 || k.SpotPrice < 0 {
			bad("negative GPUs or price of %s", k.InstanceType)
		}
	}
	switch c.Market {
	case cloud.OnDemand:
	case cloud.Spot:
		if c.SpotPrice == 0 {
			bad("market spot needs a spot price: the meter would bill spot nodes nothing")
		}
	default:
		bad("market %q is neither %s nor %s", c.Market, cloud.OnDemand, cloud.Spot)
	}
	for _, cidr := range c.DriverCIDRs {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			bad("driver address %q is not a CIDR block", cidr)
		}
	}
	if f := c.Spot.Fallback; f != spec.FallbackOnDemand && f != spec.FallbackNone {
		bad("spot fallback %q is neither %s nor %s", f, spec.FallbackOnDemand, spec.FallbackNone)
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("ec2: config: %w", errors.Join(errs...))
	}
	return c, nil
}
