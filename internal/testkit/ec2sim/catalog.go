package ec2sim

import (
	"encoding/xml"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Product descriptions of the spot price history: Linux's is the one a Linux AMI pays.
const (
	productLinux   = "Linux/UNIX"
	productWindows = "Windows"
)

// spotPrice is one record of the spot price history.
type spotPrice struct {
	seq              int
	typ, az, product string
	price            float64
	at               time.Time
}

// seedSpotHistory gives every type, zone and product the configured price, in force since an
// hour before the server started.
func (s *Server) seedSpotHistory() {
	at := s.start.Add(-time.Hour)
	for _, t := range s.cfg.InstanceTypes {
		for _, az := range s.zones {
			s.addSpotPriceLocked(t.Name, az, productLinux, t.SpotPrice, at)
			s.addSpotPriceLocked(t.Name, az, productWindows, windowsPrice(t, t.SpotPrice), at)
		}
	}
}

// windowsPrice adds a Windows licence's hourly fee per vCPU, so that a client that forgets to
// ask for Linux prices sees different numbers.
func windowsPrice(t InstanceType, linux float64) float64 {
	return roundPrice(linux + 0.046*float64(t.VCPUs))
}

func (s *Server) addSpotPriceLocked(typ, az, product string, price float64, at time.Time) {
	s.seq++
	s.spotHistory = append(s.spotHistory, spotPrice{seq: s.seq, typ: typ, az: az, product: product, price: price, at: at})
}

// spotPriceLocked is the Linux spot price in force now.
func (s *Server) spotPriceLocked(typ, az string) float64 {
	for i := len(s.spotHistory) - 1; i >= 0; i-- {
		if h := s.spotHistory[i]; h.typ == typ && h.az == az && h.product == productLinux {
			return h.price
		}
	}
	return s.types[typ].SpotPrice
}

// SetSpotPrice changes the Linux spot price of an instance type in a zone from now on: it is
// added to the price history, and spot requests whose MaxPrice is below it fail with
// SpotMaxPriceTooLow. Running instances are not interrupted by it (use Interrupt).
func (s *Server) SetSpotPrice(instanceType, az string, price float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.types[instanceType]
	if !ok {
		return fmt.Errorf("ec2sim: no instance type %s", instanceType)
	}
	if !slices.Contains(s.zones, az) {
		return fmt.Errorf("ec2sim: no zone %s (zones: %s)", az, strings.Join(s.zones, ", "))
	}
	now := time.Now().UTC()
	s.addSpotPriceLocked(instanceType, az, productLinux, price, now)
	s.addSpotPriceLocked(instanceType, az, productWindows, windowsPrice(t, price), now)
	return nil
}

func fmtPrice(p float64) string { return strconv.FormatFloat(p, 'f', 6, 64) }

type describeSpotPriceHistoryResponse struct {
	XMLName xml.Name `xml:"DescribeSpotPriceHistoryResponse"`
	respMeta
	NextToken string         `xml:"nextToken"`
	History   []xmlSpotPrice `xml:"spotPriceHistorySet>item"`
}

type xmlSpotPrice struct {
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
	AvailabilityZone   string `xml:"availabilityZone"`
}

func parseTime(p params, key string) (time.Time, error) {
	v := p.Get(key)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, ec2Err("InvalidParameterValue", "Value (%s) for parameter %s is invalid: not an ISO 8601 time.", v, key)
	}
	return t, nil
}

// describeSpotPriceHistory gives the records in [StartTime, EndTime] and, as EC2 does, the
// price in force at StartTime: asking from now gives each zone's current price. Newest first.
func (s *Server) describeSpotPriceHistory(p params) (response, error) {
	types, products := p.list("InstanceType"), p.list("ProductDescription")
	az := p.Get("AvailabilityZone")
	start, err := parseTime(p, "StartTime")
	if err != nil {
		return nil, err
	}
	end, err := parseTime(p, "EndTime")
	if err != nil {
		return nil, err
	}
	fs := p.filters()
	if err := checkFilters(fs, func(name string) bool {
		return name == "availability-zone" || name == "instance-type" || name == "product-description"
	}); err != nil {
		return nil, err
	}
	max, err := p.integer("MaxResults", 1000)
	if err != nil {
		return nil, err
	}
	if max < 1 || max > 1000 {
		return nil, ec2Err("InvalidParameterValue", "Value ( %d ) for parameter maxResults is invalid. Expecting a value between 1 and 1000.", max)
	}
	before, err := p.nextToken()
	if err != nil {
		return nil, err
	}
	if err := p.dryRun(); err != nil {
		return nil, err
	}
	want := func(h spotPrice) bool {
		if len(types) > 0 && !slices.Contains(types, h.typ) || len(products) > 0 && !slices.Contains(products, h.product) || az != "" && h.az != az {
			return false
		}
		for _, f := range fs {
			v := map[string]string{"availability-zone": h.az, "instance-type": h.typ, "product-description": h.product}[f.name]
			if !anyGlob(f.values, v) {
				return false
			}
		}
		return end.IsZero() || !h.at.After(end)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var picked []spotPrice
	inForce := map[string]spotPrice{} // the latest record before StartTime, per type, zone and product
	for _, h := range s.spotHistory {
		if !want(h) {
			continue
		}
		if !start.IsZero() && h.at.Before(start) {
			inForce[h.typ+" "+h.az+" "+h.product] = h
			continue
		}
		picked = append(picked, h)
	}
	for _, h := range inForce {
		picked = append(picked, h)
	}
	sort.Slice(picked, func(i, j int) bool { return picked[i].seq > picked[j].seq })
	// Pages run newest first and a token names the last record given: records added between
	// two pages are newer, so they neither repeat nor shift the rest.
	out := &describeSpotPriceHistoryResponse{}
	last := 0
	for _, h := range picked {
		if before > 0 && h.seq >= before {
			continue
		}
		if len(out.History) == max {
			out.NextToken = pageToken(last)
			break
		}
		last = h.seq
		out.History = append(out.History, xmlSpotPrice{InstanceType: h.typ, ProductDescription: h.product,
			SpotPrice: fmtPrice(h.price), Timestamp: ec2Time(h.at), AvailabilityZone: h.az})
	}
	return out, nil
}
