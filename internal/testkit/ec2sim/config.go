package ec2sim

import (
	"fmt"
	"maps"
	"regexp"
	"time"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Config describes the fake account and region. The zero value works: one region, two zones,
// the built-in catalog's instance types and prices, generous quotas.
type Config struct {
	// Region is the only region the fake serves (default DefaultRegion); requests signed for
	// another are refused, as a real regional endpoint would.
	Region string
	// Subnets maps each subnet id to its availability zone (default DefaultSubnets: one subnet
	// in each of Region's zones a and b).
	Subnets map[string]string
	// Dir holds one directory per instance: its user-data, working directory and console.log.
	// Empty means a temporary directory that Close removes.
	Dir string
	// BootDelay is how long an instance stays pending before it runs; BootDelayFunc, when set,
	// is asked instead, once per instance (a test passes its scale latency here).
	BootDelay     time.Duration
	BootDelayFunc func(instanceType string) time.Duration
	// KillGrace is how long a terminated instance's processes get between SIGTERM and SIGKILL
	// (default DefaultKillGrace).
	KillGrace time.Duration
	// Env is added to every instance's user-data environment ("KEY=value"), after the fake's own
	// variables, so it can override them.
	Env []string
	// InstanceTypes are the types RunInstances accepts (default DefaultInstanceTypes()).
	InstanceTypes []InstanceType
	// Quotas are vCPU quotas by Service Quotas code, over DefaultQuotas().
	Quotas map[string]float64
	// Images, when not empty, are the only AMIs that exist; otherwise any well-formed id does.
	Images []string
	// InstanceCredentials, when set, are served on the IMDS of instances started with an
	// instance profile, as the profile's role credentials.
	InstanceCredentials *Credentials
}

// InstanceType is one instance type the fake rents, with its shape and its prices in Region.
type InstanceType struct {
	Name         string
	VCPUs        int
	MemoryMiB    int
	GPUs         int
	GPUModel     string
	GPUMemoryMiB int // per GPU
	// NetworkGbps is served as DescribeInstanceTypes' network performance, in AWS's words:
	// "Up to N Gigabit" for types of fewer than 16 vCPUs (burstable), "4x 100 Gigabit" for 400
	// (p4d's), else "N Gigabit"; 0 serves none.
	NetworkGbps float64
	// OnDemandPrice and SpotPrice are dollars an hour; SpotPrice is the price in every zone
	// until SetSpotPrice says otherwise.
	OnDemandPrice float64
	SpotPrice     float64
}

// Credentials are what an instance profile's role hands out through IMDS.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// Defaults.
const (
	DefaultRegion    = "us-east-1"
	DefaultKillGrace = 2 * time.Second
	// AccountID owns every reservation.
	AccountID = "123456789012"
)

// Service Quotas codes of the vCPU quotas the fake enforces (service code "ec2").
const (
	QuotaOnDemandStandard = "L-1216C47A" // Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances
	QuotaOnDemandP        = "L-417A185B" // Running On-Demand P instances
	QuotaOnDemandG        = "L-DB2E81BA" // Running On-Demand G and VT instances
	QuotaSpotStandard     = "L-34B43A08" // All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests
	QuotaSpotP            = "L-7212CCBC" // All P Spot Instance Requests
	QuotaSpotG            = "L-3819A6DF" // All G and VT Spot Instance Requests
)

// quotaName is a quota's name as Service Quotas gives it, "" for a code the fake does not
// enforce.
func quotaName(code string) string {
	switch code {
	case QuotaOnDemandStandard:
		return "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"
	case QuotaOnDemandP:
		return "Running On-Demand P instances"
	case QuotaOnDemandG:
		return "Running On-Demand G and VT instances"
	case QuotaSpotStandard:
		return "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"
	case QuotaSpotP:
		return "All P Spot Instance Requests"
	case QuotaSpotG:
		return "All G and VT Spot Instance Requests"
	}
	return ""
}

// DefaultQuotas gives every enforced quota 1024 vCPUs: enough that only a test that lowers one
// meets it.
func DefaultQuotas() map[string]float64 {
	q := map[string]float64{}
	for _, code := range []string{QuotaOnDemandStandard, QuotaOnDemandP, QuotaOnDemandG, QuotaSpotStandard, QuotaSpotP, QuotaSpotG} {
		q[code] = 1024
	}
	return q
}

// DefaultSubnets is one subnet in each of region's zones a and b.
func DefaultSubnets(region string) map[string]string {
	return map[string]string{
		"subnet-0a0000000000000a1": region + "a",
		"subnet-0b0000000000000b2": region + "b",
	}
}

// DefaultInstanceTypes are the built-in catalog's GPU types (spec.Catalog), with its shapes, so
// that the prices and GPUs the fake serves are the ones a plan was made with, plus a few small
// types for tests that need no GPU. A spot price the catalog lacks is 30% of on-demand.
func DefaultInstanceTypes() []InstanceType {
	var out []InstanceType
	for _, c := range spec.Catalog() {
		spot := c.SpotPricePerHour
		if spot == 0 {
			spot = roundPrice(0.3 * c.PricePerHour)
		}
		out = append(out, InstanceType{Name: c.Name, VCPUs: c.VCPUs, MemoryMiB: int(c.MemoryGiB * 1024), GPUs: c.GPUs,
			GPUModel: c.GPUModel, GPUMemoryMiB: int(c.GPUMemoryGiB * 1024), NetworkGbps: c.NetworkGbps,
			OnDemandPrice: c.PricePerHour, SpotPrice: spot})
	}
	return append(out,
		InstanceType{Name: "c5.large", VCPUs: 2, MemoryMiB: 4096, NetworkGbps: 10, OnDemandPrice: 0.085, SpotPrice: 0.0255},
		InstanceType{Name: "t3.micro", VCPUs: 2, MemoryMiB: 1024, NetworkGbps: 5, OnDemandPrice: 0.0104, SpotPrice: 0.0031},
	)
}

func roundPrice(p float64) float64 {
	return float64(int64(p*10000+0.5)) / 10000
}

var (
	regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	subnetRE = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	amiRE    = regexp.MustCompile(`^ami-[0-9a-f]{8,17}$`)
	sgRE     = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)
)

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if !regionRE.MatchString(c.Region) {
		return c, fmt.Errorf("ec2sim: region %q is not an AWS region", c.Region)
	}
	if len(c.Subnets) == 0 {
		c.Subnets = DefaultSubnets(c.Region)
	}
	for id, az := range c.Subnets {
		if !subnetRE.MatchString(id) {
			return c, fmt.Errorf("ec2sim: %q is not a subnet id", id)
		}
		if len(az) != len(c.Region)+1 || az[:len(c.Region)] != c.Region {
			return c, fmt.Errorf("ec2sim: subnet %s is in zone %q, not a zone of %s", id, az, c.Region)
		}
	}
	if c.KillGrace <= 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.InstanceTypes == nil {
		c.InstanceTypes = DefaultInstanceTypes()
	}
	for _, t := range c.InstanceTypes {
		if t.Name == "" || t.VCPUs <= 0 {
			return c, fmt.Errorf("ec2sim: instance type %q needs a name and vCPUs", t.Name)
		}
	}
	q := DefaultQuotas()
	maps.Copy(q, c.Quotas)
	c.Quotas = q
	for _, img := range c.Images {
		if !amiRE.MatchString(img) {
			return c, fmt.Errorf("ec2sim: %q is not an AMI id", img)
		}
	}
	return c, nil
}
