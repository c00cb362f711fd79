package ec2sim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
)

type getProductsInput struct {
	ServiceCode   string
	Filters       []priceFilter
	FormatVersion string
	MaxResults    *int
	NextToken     string
}

type priceFilter struct {
	Type  string
	Field string
	Value string
}

// product is one price-list entry: a SKU's attributes and its on-demand hourly price.
type product struct {
	attrs map[string]string
	price float64
}

// regionName is the Price List API's "location" of a region.
func regionName(region string) string {
	switch region {
	case "us-east-1":
		return "US East (N. Virginia)"
	case "us-east-2":
		return "US East (Ohio)"
	case "us-west-1":
		return "US West (N. California)"
	case "us-west-2":
		return "US West (Oregon)"
	case "eu-west-1":
		return "EU (Ireland)"
	case "eu-central-1":
		return "EU (Frankfurt)"
	case "ap-south-1":
		return "Asia Pacific (Mumbai)"
	}
	return region
}

// products lists the price list the fake serves: each type in Region as Linux, as Windows and
// as Linux on dedicated tenancy, and again in another region at other prices. A client that
// filters on fewer than instanceType, regionCode (or location), operatingSystem, tenancy,
// preInstalledSw and capacitystatus gets several products, as from AWS.
func (s *Server) products() []product {
	other := "us-west-2"
	if s.cfg.Region == other {
		other = "us-east-1"
	}
	var out []product
	for _, region := range []string{s.cfg.Region, other} {
		for _, t := range s.cfg.InstanceTypes {
			base := t.OnDemandPrice // as configured: AWS lists prices of five decimals (g6e.xlarge's 2.24208)
			if region != s.cfg.Region {
				base = roundPrice(base * 1.12)
			}
			variants := []struct {
				os, tenancy string
				price       float64
			}{
				{"Linux", "Shared", base},
				{"Windows", "Shared", windowsPrice(t, base)},
				{"Linux", "Dedicated", roundPrice(base * 1.1)},
			}
			for _, v := range variants {
				usage := "BoxUsage:" + t.Name
				if v.tenancy == "Dedicated" {
					usage = "DedicatedUsage:" + t.Name
				}
				attrs := map[string]string{
					"servicecode": "AmazonEC2", "servicename": "Amazon Elastic Compute Cloud",
					"instanceType": t.Name, "instanceFamily": family(t), "location": regionName(region),
					"locationType": "AWS Region", "regionCode": region, "operatingSystem": v.os,
					"tenancy": v.tenancy, "preInstalledSw": "NA", "capacitystatus": "Used",
					"licenseModel": "No License required", "marketoption": "OnDemand",
					"vcpu": strconv.Itoa(t.VCPUs), "memory": fmt.Sprintf("%g GiB", float64(t.MemoryMiB)/1024),
					"gpu": strconv.Itoa(t.GPUs), "usagetype": usage, "operation": "RunInstances",
				}
				if v.os == "Windows" {
					attrs["licenseModel"], attrs["operation"] = "License included", "RunInstances:0002"
				}
				out = append(out, product{attrs: attrs, price: v.price})
			}
		}
	}
	return out
}

func family(t InstanceType) string {
	if t.GPUs > 0 {
		return "GPU instance"
	}
	return "General purpose"
}

func (pr product) matches(f priceFilter) (bool, error) {
	var v string
	for k, val := range pr.attrs {
		if strings.EqualFold(k, f.Field) {
			v = val
		}
	}
	switch f.Type {
	case "TERM_MATCH", "EQUALS":
		return strings.EqualFold(v, f.Value), nil
	case "CONTAINS":
		return strings.Contains(strings.ToLower(v), strings.ToLower(f.Value)), nil
	case "ANY_OF", "NONE_OF":
		hit := false
		for _, want := range strings.Split(f.Value, ",") {
			hit = hit || strings.EqualFold(v, strings.TrimSpace(want))
		}
		return hit == (f.Type == "ANY_OF"), nil
	}
	return false, jsonErr(http.StatusBadRequest, "InvalidParameterException", "Filter type %q is not one of TERM_MATCH, EQUALS, CONTAINS, ANY_OF, NONE_OF.", f.Type)
}

// priceListItem is a product in AWS's price-list JSON, the way GetProducts returns each one:
// as a JSON document inside a string.
func (pr product) priceListItem() string {
	h := fnv.New64a()
	for _, k := range []string{"instanceType", "regionCode", "operatingSystem", "tenancy"} {
		h.Write([]byte(pr.attrs[k] + "|"))
	}
	sku := strings.ToUpper(strconv.FormatUint(h.Sum64(), 36))
	const term, rate = "JRTCKXETXF", "6YS6EN2CT7" // AWS's codes of the on-demand term and its hourly rate
	item := map[string]any{
		"product":         map[string]any{"productFamily": "Compute Instance", "attributes": pr.attrs, "sku": sku},
		"serviceCode":     "AmazonEC2",
		"version":         "20260101000000",
		"publicationDate": "2026-01-01T00:00:00Z",
		"terms": map[string]any{"OnDemand": map[string]any{
			sku + "." + term: map[string]any{
				"offerTermCode": term, "sku": sku, "effectiveDate": "2026-01-01T00:00:00Z", "termAttributes": map[string]any{},
				"priceDimensions": map[string]any{sku + "." + term + "." + rate: map[string]any{
					"unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": []string{},
					"rateCode":     sku + "." + term + "." + rate,
					"description":  fmt.Sprintf("$%s per On Demand %s %s Instance Hour", strconv.FormatFloat(pr.price, 'f', 4, 64), pr.attrs["operatingSystem"], pr.attrs["instanceType"]),
					"pricePerUnit": map[string]string{"USD": strconv.FormatFloat(pr.price, 'f', 10, 64)},
				}},
			},
		}},
	}
	b, _ := json.Marshal(item)
	return string(b)
}

func (s *Server) getProducts(in getProductsInput) (any, error) {
	if in.ServiceCode == "" {
		return nil, jsonErr(http.StatusBadRequest, "InvalidParameterException", "ServiceCode is required.")
	}
	if in.ServiceCode != "AmazonEC2" {
		return nil, jsonErr(http.StatusBadRequest, "NotFoundException", "Service %s is not in the fake's price list (AmazonEC2 is).", in.ServiceCode)
	}
	if in.FormatVersion != "" && in.FormatVersion != "aws_v1" {
		return nil, jsonErr(http.StatusBadRequest, "InvalidParameterException", "FormatVersion %q is not aws_v1.", in.FormatVersion)
	}
	max := 100
	if in.MaxResults != nil {
		if max = *in.MaxResults; max < 1 || max > 100 {
			return nil, jsonErr(http.StatusBadRequest, "InvalidParameterException", "MaxResults must be 1 to 100.")
		}
	}
	from, ok := readPageToken(in.NextToken)
	if !ok {
		return nil, jsonErr(http.StatusBadRequest, "InvalidNextTokenException", "Invalid NextToken %q.", in.NextToken)
	}
	var hits []product
	for _, pr := range s.products() {
		ok := true
		for _, f := range in.Filters {
			m, err := pr.matches(f)
			if err != nil {
				return nil, err
			}
			ok = ok && m
		}
		if ok {
			hits = append(hits, pr)
		}
	}
	out := map[string]any{"FormatVersion": "aws_v1", "PriceList": []string{}}
	var list []string
	for i := from; i < len(hits); i++ {
		if len(list) == max {
			out["NextToken"] = pageToken(i)
			break
		}
		list = append(list, hits[i].priceListItem())
	}
	if list != nil {
		out["PriceList"] = list
	}
	return out, nil
}
