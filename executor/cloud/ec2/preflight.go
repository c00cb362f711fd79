package ec2

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// Need is the most nodes of one instance type on one market a plan holds at once; an empty type
// or market is the Config's own.
type Need struct {
	InstanceType string
	Market       cloud.Market
	Nodes        int
}

// Preflight says, before any money is spent, what would stop a run whose plan needs needs: a
// RunInstances dry run of every instance type the provider rents in every subnet (permissions,
// AMI, subnets, security groups, instance profile, user-data), and each vCPU quota the needs
// count against (one per family and market) against the sum of their nodes times their type's
// vCPUs. The quota is compared whole: what other instances already use of it is not counted.
// nil means nothing found.
func (p *Provider) Preflight(ctx context.Context, needs []Need) error {
	var errs []error
	badSubnet := map[string]bool{}
dryRuns:
	for _, k := range p.kinds {
		m := p.cfg.Market
		if k.SpotPrice == 0 {
			m = cloud.OnDemand
		}
		n, err := p.plan("preflight", 0, k)
		if err != nil {
			return fmt.Errorf("ec2: preflight: %w", err)
		}
		for _, subnet := range p.cfg.EC2.Subnets {
			if badSubnet[subnet] {
				continue // said once, for the first type
			}
			in := p.runInput(n, attempt{subnet, m})
			in.DryRun, in.ClientToken = aws.Bool(true), nil
			_, err := p.ec2.RunInstances(ctx, in)
			code := apiCode(err)
			if code == "DryRunOperation" {
				continue
			}
			if err == nil { // an endpoint that ignored DryRun rented one: give it back
				err = errors.New("the dry run was not a dry run")
			}
			errs = append(errs, dryRunError(k.InstanceType, string(m), subnet, code, err))
			if !strings.HasPrefix(code, "InvalidSubnet") {
				break dryRuns // the same answer in every subnet, for every type
			}
			badSubnet[subnet] = true
		}
	}
	if err := p.checkQuotas(ctx, needs); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("ec2: preflight: %w", errors.Join(errs...))
	}
	return nil
}

// dryRunError says what a failed dry run means.
func dryRunError(typ, market, subnet, code string, err error) error {
	var what string
	switch {
	case code == "UnauthorizedOperation":
		what = "these credentials may not launch instances (ec2:RunInstances, or iam:PassRole for the instance profile)"
	case strings.HasPrefix(code, "InvalidAMIID"):
		what = "the AMI (cluster.ec2.ami) cannot be launched"
	case strings.HasPrefix(code, "InvalidSubnet"):
		what = "subnet " + subnet + " (cluster.ec2.subnets) cannot be used"
	case strings.HasPrefix(code, "InvalidGroup"):
		what = "the security groups (cluster.ec2.security_groups) cannot be used"
	case strings.HasPrefix(code, "InvalidKeyPair"):
		what = "the key pair (cluster.ec2.key_name) cannot be used"
	case strings.Contains(code, "IamInstanceProfile") || strings.Contains(apiMessage(err), "iamInstanceProfile"):
		what = "the instance profile (cluster.ec2.instance_profile) cannot be used"
	default:
		what = "the launch would fail"
	}
	return fmt.Errorf("%s (a %s %s instance in %s): %w", what, typ, market, subnet, err)
}

// checkQuotas compares each vCPU quota the needs count against with what they need of it.
func (p *Provider) checkQuotas(ctx context.Context, needs []Need) error {
	type use struct {
		q     quota
		vcpus int
		parts []string
	}
	var order []string
	uses := map[string]*use{}
	vcpus := map[string]int{}
	var errs []error
	for _, nd := range needs {
		typ, m := cmp.Or(nd.InstanceType, p.cfg.InstanceType), cmp.Or(nd.Market, p.cfg.Market)
		q, ok := quotaFor(typ, m)
		if !ok || nd.Nodes <= 0 {
			continue
		}
		v, known := vcpus[typ]
		if !known {
			var err error
			if v, err = p.vcpus(ctx, typ); err != nil {
				errs = append(errs, err)
				continue
			}
			vcpus[typ] = v
		}
		u := uses[q.code]
		if u == nil {
			u = &use{q: q}
			uses[q.code] = u
			order = append(order, q.code)
		}
		u.vcpus += nd.Nodes * v
		u.parts = append(u.parts, fmt.Sprintf("%d %s nodes of %d vCPUs", nd.Nodes, typ, v))
	}
	for _, code := range order {
		u := uses[code]
		out, err := p.quotas.GetServiceQuota(ctx, &servicequotas.GetServiceQuotaInput{ServiceCode: aws.String("ec2"), QuotaCode: aws.String(code)})
		if err != nil {
			errs = append(errs, fmt.Errorf("read vCPU quota %s (%s): %w", code, u.q.name, err))
			continue
		}
		if out.Quota == nil || out.Quota.Value == nil {
			errs = append(errs, fmt.Errorf("read vCPU quota %s (%s): no value", code, u.q.name))
			continue
		}
		if have := *out.Quota.Value; float64(u.vcpus) > have {
			errs = append(errs, fmt.Errorf("vCPU quota %s (%s) is %g vCPUs; the plan needs %s = %d: ask AWS to raise it in Service Quotas",
				code, u.q.name, have, strings.Join(u.parts, " + "), u.vcpus))
		}
	}
	return errors.Join(errs...)
}

// vcpus is how many vCPUs an instance of typ has, as EC2 describes it.
func (p *Provider) vcpus(ctx context.Context, typ string) (int, error) {
	desc, err := p.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(typ)}})
	if err != nil {
		return 0, fmt.Errorf("describe instance type %s: %w", typ, err)
	}
	if len(desc.InstanceTypes) != 1 || desc.InstanceTypes[0].VCpuInfo == nil {
		return 0, fmt.Errorf("describe instance type %s: EC2 does not describe it in this region", typ)
	}
	return int(aws.ToInt32(desc.InstanceTypes[0].VCpuInfo.DefaultVCpus)), nil
}
