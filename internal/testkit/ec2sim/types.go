package ec2sim

import (
	"encoding/xml"
	"fmt"
	"slices"
	"sort"
	"strings"
)

type describeInstanceTypesResponse struct {
	XMLName xml.Name `xml:"DescribeInstanceTypesResponse"`
	respMeta
	Types     []xmlInstanceType `xml:"instanceTypeSet>item"`
	NextToken string            `xml:"nextToken,omitempty"`
}

type xmlInstanceType struct {
	InstanceType          string      `xml:"instanceType"`
	CurrentGeneration     bool        `xml:"currentGeneration"`
	SupportedUsageClasses []string    `xml:"supportedUsageClasses>item"`
	Architectures         []string    `xml:"processorInfo>supportedArchitectures>item"`
	VCPUs                 xmlVCPUInfo `xml:"vCpuInfo"`
	MemoryMiB             int         `xml:"memoryInfo>sizeInMiB"`
	NetworkPerformance    string      `xml:"networkInfo>networkPerformance,omitempty"`
	GPUs                  *xmlGPUInfo `xml:"gpuInfo,omitempty"`
}

type xmlVCPUInfo struct {
	DefaultVCPUs          int `xml:"defaultVCpus"`
	DefaultCores          int `xml:"defaultCores"`
	DefaultThreadsPerCore int `xml:"defaultThreadsPerCore"`
}

type xmlGPUInfo struct {
	GPUs        []xmlGPU `xml:"gpus>item"`
	TotalMemory int      `xml:"totalGpuMemoryInMiB"`
}

type xmlGPU struct {
	Name         string `xml:"name"`
	Manufacturer string `xml:"manufacturer"`
	Count        int    `xml:"count"`
	MemoryMiB    int    `xml:"memoryInfo>sizeInMiB"`
}

func xmlType(t InstanceType) xmlInstanceType {
	threads := 2
	if t.VCPUs%2 != 0 {
		threads = 1
	}
	x := xmlInstanceType{InstanceType: t.Name, CurrentGeneration: true,
		SupportedUsageClasses: []string{"on-demand", "spot"}, Architectures: []string{"x86_64"},
		VCPUs:     xmlVCPUInfo{DefaultVCPUs: t.VCPUs, DefaultCores: t.VCPUs / threads, DefaultThreadsPerCore: threads},
		MemoryMiB: t.MemoryMiB, NetworkPerformance: networkPerformance(t)}
	if t.GPUs > 0 {
		x.GPUs = &xmlGPUInfo{GPUs: []xmlGPU{{Name: t.GPUModel, Manufacturer: "NVIDIA", Count: t.GPUs, MemoryMiB: t.GPUMemoryMiB}},
			TotalMemory: t.GPUs * t.GPUMemoryMiB}
	}
	return x
}

// networkPerformance is how DescribeInstanceTypes words a type's bandwidth.
func networkPerformance(t InstanceType) string {
	switch {
	case t.NetworkGbps <= 0:
		return ""
	case t.NetworkGbps == 400:
		return "4x 100 Gigabit"
	case t.VCPUs < 16:
		return fmt.Sprintf("Up to %g Gigabit", t.NetworkGbps)
	}
	return fmt.Sprintf("%g Gigabit", t.NetworkGbps)
}

func (s *Server) describeInstanceTypes(p params) (response, error) {
	names := p.list("InstanceType")
	fs := p.filters()
	if err := checkFilters(fs, func(name string) bool { return name == "instance-type" }); err != nil {
		return nil, err
	}
	var unknown []string
	for _, n := range names {
		if _, ok := s.types[n]; !ok {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, ec2Err("InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(unknown, ", "))
	}
	max, err := p.integer("MaxResults", 100)
	if err != nil {
		return nil, err
	}
	if max < 5 || max > 100 {
		return nil, ec2Err("InvalidParameterValue", "Value ( %d ) for parameter maxResults is invalid. Expecting a value between 5 and 100.", max)
	}
	from, err := p.nextToken()
	if err != nil {
		return nil, err
	}
	if err := p.dryRun(); err != nil {
		return nil, err
	}
	var all []InstanceType
	for _, t := range s.cfg.InstanceTypes {
		if len(names) > 0 && !slices.Contains(names, t.Name) {
			continue
		}
		ok := true
		for _, f := range fs {
			ok = ok && anyGlob(f.values, t.Name)
		}
		if ok {
			all = append(all, t)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	out := &describeInstanceTypesResponse{}
	for i := from; i < len(all); i++ {
		if len(out.Types) == max {
			out.NextToken = pageToken(i)
			break
		}
		out.Types = append(out.Types, xmlType(all[i]))
	}
	return out, nil
}
