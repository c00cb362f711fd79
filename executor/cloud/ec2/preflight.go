package ec2

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
)

// Preflight says, before any money is spent, what would stop a run that holds up to maxNodes
// nodes at once: a RunInstances dry run in every subnet (permissions, AMI, subnets, security
// groups, instance profile, user-data), and the account's vCPU quota for the instance family
// on the configured market against maxNodes times the type's vCPUs. The quota is compared
// whole: what other instances already use of it is not counted. nil means nothing found.
func (p *Provider) Preflight(ctx context.Context, maxNodes int) error {
	var errs []error
	n, err := p.plan("preflight", 0)
	if err != nil {
		return fmt.Errorf("ec2: preflight: %w", err)
	}
	for _, subnet := range p.cfg.EC2.Subnets {
		in := p.runInput(n, attempt{subnet, p.cfg.Market})
		in.DryRun, in.ClientToken = aws.Bool(true), nil
		_, err := p.ec2.RunInstances(ctx, in)
		code := apiCode(err)
		if code == "DryRunOperation" {
			continue
		}
		if err == nil { // an endpoint that ignored DryRun rented one: give it back
			err = errors.New("the dry run was not a dry run")
		}
		errs = append(errs, dryRunError(p.cfg.InstanceType, string(p.cfg.Market), subnet, code, err))
		if !strings.HasPrefix(code, "InvalidSubnet") {
			break // the same answer in every subnet
		}
	}
	if err := p.checkQuota(ctx, maxNodes); err != nil {
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

// checkQuota compares the vCPU quota of the configured market's family with maxNodes nodes.
func (p *Provider) checkQuota(ctx context.Context, maxNodes int) error {
	q, ok := quotaFor(p.cfg.InstanceType, p.cfg.Market)
	if !ok || maxNodes <= 0 {
		return nil
	}
	desc, err := p.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(p.cfg.InstanceType)}})
	if err != nil {
		return fmt.Errorf("describe instance type %s: %w", p.cfg.InstanceType, err)
	}
	if len(desc.InstanceTypes) != 1 || desc.InstanceTypes[0].VCpuInfo == nil {
		return fmt.Errorf("describe instance type %s: EC2 does not describe it in this region", p.cfg.InstanceType)
	}
	vcpus := int(aws.ToInt32(desc.InstanceTypes[0].VCpuInfo.DefaultVCpus))
	out, err := p.quotas.GetServiceQuota(ctx, &servicequotas.GetServiceQuotaInput{ServiceCode: aws.String("ec2"), QuotaCode: aws.String(q.code)})
	if err != nil {
		return fmt.Errorf("read vCPU quota %s (%s): %w", q.code, q.name, err)
	}
	if out.Quota == nil || out.Quota.Value == nil {
		return fmt.Errorf("read vCPU quota %s (%s): no value", q.code, q.name)
	}
	have, need := *out.Quota.Value, maxNodes*vcpus
	if float64(need) > have {
		return fmt.Errorf("vCPU quota %s (%s) is %g vCPUs; the plan needs %d %s nodes of %d vCPUs = %d: ask AWS to raise it in Service Quotas",
			q.code, q.name, have, maxNodes, p.cfg.InstanceType, vcpus, need)
	}
	return nil
}
