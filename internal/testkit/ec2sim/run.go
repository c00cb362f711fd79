package ec2sim

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// maxUserData is EC2's limit on user-data, before base64.
const maxUserData = 16 << 10

// reservation is what one RunInstances made.
type reservation struct {
	id        string
	groups    []string
	instances []*instance
	key       string // the request's parameters, to tell a replay from a different request
}

// runRequest is a checked RunInstances request.
type runRequest struct {
	imageID, typ, subnet, az     string
	keyName, profile, token      string
	shutdown                     string
	groups                       []string
	userData                     []byte
	min, max                     int
	spot                         bool
	maxPrice                     float64 // 0: the on-demand price, EC2's default cap
	instanceTags, volumeTags     []tag
	spotType, interruptBehaviour string
}

func (s *Server) runInstances(p params) (response, error) {
	resp, stall, err := s.rent(p)
	for end := time.Now().Add(stall); time.Now().Before(end) && !s.isClosed(); {
		time.Sleep(min(50*time.Millisecond, time.Until(end)))
	}
	return resp, err
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// rent answers a RunInstances, and says how long to hold the answer (StallRunInstances).
func (s *Server) rent(p params) (response, time.Duration, error) {
	req, err := s.parseRun(p)
	if err != nil {
		return nil, 0, err
	}
	if err := p.dryRun(); err != nil {
		return nil, 0, err
	}
	key := idempotencyKey(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, ec2Err("Unavailable", "The service is shutting down.")
	}
	if req.token != "" {
		// A retry of a request that succeeded gets what that request made, never more.
		if res, ok := s.tokens[req.token]; ok {
			if res.key != key {
				return nil, 0, ec2Err("IdempotentParameterMismatch", "The client token %s was used before with different parameters.", req.token)
			}
			return &runInstancesResponse{XMLName: xmlName("RunInstancesResponse"), xmlReservation: s.xmlReservationLocked(res, res.instances)}, 0, nil
		}
	}
	if err := s.takeCapacityFaultLocked(req); err != nil {
		return nil, 0, err
	}
	it := s.types[req.typ]
	if req.spot {
		bid := req.maxPrice
		if bid == 0 {
			bid = it.OnDemandPrice
		}
		if price := s.spotPriceLocked(req.typ, req.az); bid < price {
			return nil, 0, ec2Err("SpotMaxPriceTooLow", "Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %s.", fmtPrice(bid), fmtPrice(price))
		}
	}
	n, err := s.fitQuotaLocked(req, it)
	if err != nil {
		return nil, 0, err
	}
	res := &reservation{id: randomID("r"), groups: req.groups, key: key}
	now := time.Now().UTC()
	for i := range n {
		in, err := s.newInstanceLocked(req, res, i, now)
		if err != nil {
			return nil, 0, err
		}
		res.instances = append(res.instances, in)
	}
	if len(res.instances) > 0 {
		s.notifyLocked() // WaitLaunched
	}
	for _, in := range res.instances {
		s.seq++
		in.seq = s.seq
		s.instances[in.ID] = in
		s.order = append(s.order, in)
		s.volumes[in.VolumeID] = in
		delay := s.cfg.BootDelay
		if s.cfg.BootDelayFunc != nil {
			delay = s.cfg.BootDelayFunc(in.Type)
		}
		s.wg.Add(1)
		go s.live(in, delay)
	}
	if req.token != "" {
		s.tokens[req.token] = res
	}
	s.notifyLocked()
	return &runInstancesResponse{XMLName: xmlName("RunInstancesResponse"), xmlReservation: s.xmlReservationLocked(res, res.instances)}, s.takeStallLocked(), nil
}

func (s *Server) newInstanceLocked(req runRequest, res *reservation, i int, now time.Time) (*instance, error) {
	in := &instance{Instance: Instance{
		ID: randomID("i"), ReservationID: res.id, ImageID: req.imageID, Type: req.typ, AZ: req.az,
		SubnetID: req.subnet, State: StatePending, Market: MarketOnDemand, Tags: map[string]string{},
		VolumeID: randomID("vol"), VolumeTags: map[string]string{}, ClientToken: req.token,
		KeyName: req.keyName, InstanceProfile: req.profile, SecurityGroups: slices.Clone(req.groups),
		ShutdownBehavior: req.shutdown, UserData: req.userData, LaunchTime: now,
	}, amiIndex: i, final: StateTerminated, halt: make(chan struct{})}
	if req.spot {
		in.Market, in.SpotRequestID, in.MaxPrice = MarketSpot, spotRequestID(), req.maxPrice
		if in.MaxPrice == 0 {
			in.MaxPrice = s.types[req.typ].OnDemandPrice
		}
	}
	for _, t := range req.instanceTags {
		in.Tags[t.Key] = t.Value
	}
	for _, t := range req.volumeTags {
		in.VolumeTags[t.Key] = t.Value
	}
	if s.neverBoot > 0 {
		s.neverBoot--
		in.neverBoot = true
	}
	in.Dir = filepath.Join(s.cfg.Dir, in.ID)
	if err := os.MkdirAll(in.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("instance directory: %w", err)
	}
	return in, nil
}

func spotRequestID() string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := []byte("sir-")
	for range 8 {
		b = append(b, letters[rand.IntN(len(letters))])
	}
	return string(b)
}

// parseRun checks a RunInstances request as EC2 would before a dry run answers.
func (s *Server) parseRun(p params) (runRequest, error) {
	var req runRequest
	req.imageID = p.Get("ImageId")
	switch {
	case req.imageID == "":
		return req, ec2Err("MissingParameter", "The request must contain the parameter ImageId")
	case !amiRE.MatchString(req.imageID):
		return req, ec2Err("InvalidAMIID.Malformed", "Invalid id: %q (expecting \"ami-...\")", req.imageID)
	case len(s.cfg.Images) > 0 && !slices.Contains(s.cfg.Images, req.imageID):
		return req, ec2Err("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", req.imageID)
	}
	req.typ = p.Get("InstanceType")
	if req.typ == "" {
		return req, ec2Err("MissingParameter", "The request must contain the parameter InstanceType (the fake has no default type)")
	}
	if _, ok := s.types[req.typ]; !ok {
		return req, ec2Err("InvalidParameterValue", "Invalid value '%s' for InstanceType.", req.typ)
	}
	var err error
	if p.Get("MinCount") == "" || p.Get("MaxCount") == "" {
		return req, ec2Err("MissingParameter", "The request must contain the parameters MinCount and MaxCount")
	}
	if req.min, err = p.integer("MinCount", 0); err != nil {
		return req, err
	}
	if req.max, err = p.integer("MaxCount", 0); err != nil {
		return req, err
	}
	if req.min < 1 || req.max < req.min {
		return req, ec2Err("InvalidParameterValue", "MinCount (%d) must be at least 1 and at most MaxCount (%d).", req.min, req.max)
	}
	if err := s.placeRun(p, &req); err != nil {
		return req, err
	}
	req.groups = p.list("SecurityGroupId")
	for _, g := range req.groups {
		if !sgRE.MatchString(g) {
			return req, ec2Err("InvalidGroupId.Malformed", "Invalid id: %q (expecting \"sg-...\")", g)
		}
		s.mu.Lock()
		known := s.groupKnownLocked(g)
		s.mu.Unlock()
		if !known {
			return req, ec2Err("InvalidGroup.NotFound", "The security group '%s' does not exist in VPC '%s'", g, vpcID)
		}
	}
	req.keyName = p.Get("KeyName")
	req.profile = p.Get("IamInstanceProfile.Arn")
	if req.profile == "" {
		req.profile = p.Get("IamInstanceProfile.Name")
	}
	req.token = p.Get("ClientToken")
	if len(req.token) > 64 {
		return req, ec2Err("InvalidParameterValue", "The client token must be at most 64 ASCII characters.")
	}
	if ud := p.Get("UserData"); ud != "" {
		if req.userData, err = base64.StdEncoding.DecodeString(ud); err != nil {
			return req, ec2Err("InvalidParameterValue", "Invalid BASE64 encoding of user data.")
		}
		if len(req.userData) > maxUserData {
			return req, ec2Err("InvalidParameterValue", "User data is limited to %d bytes", maxUserData)
		}
	}
	switch req.shutdown = p.Get("InstanceInitiatedShutdownBehavior"); req.shutdown {
	case "":
		req.shutdown = "stop" // EC2's default
	case "stop", "terminate":
	default:
		return req, ec2Err("InvalidParameterValue", "Invalid value '%s' for InstanceInitiatedShutdownBehavior (stop or terminate).", req.shutdown)
	}
	if err := parseTagSpecs(p, &req); err != nil {
		return req, err
	}
	return req, parseMarket(p, &req)
}

// placeRun picks the subnet and zone: the subnet given, or one in the zone given, or the first
// zone's.
func (s *Server) placeRun(p params, req *runRequest) error {
	req.subnet = p.Get("SubnetId")
	wantAZ := p.Get("Placement.AvailabilityZone")
	if req.subnet != "" {
		az, ok := s.cfg.Subnets[req.subnet]
		if !ok {
			return ec2Err("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", req.subnet)
		}
		if wantAZ != "" && wantAZ != az {
			return ec2Err("InvalidParameterCombination", "The specified Availability Zone %s does not match the subnet %s's zone %s.", wantAZ, req.subnet, az)
		}
		req.az = az
		return nil
	}
	if wantAZ == "" {
		wantAZ = s.zones[0]
	}
	ids := make([]string, 0, len(s.cfg.Subnets))
	for id, az := range s.cfg.Subnets {
		if az == wantAZ {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return ec2Err("InvalidParameterValue", "Invalid availability zone: [%s]", wantAZ)
	}
	sort.Strings(ids)
	req.subnet, req.az = ids[0], wantAZ
	return nil
}

func parseTagSpecs(p params, req *runRequest) error {
	for _, n := range p.indices("TagSpecification") {
		pre := fmt.Sprintf("TagSpecification.%d", n)
		tags, err := p.tags(pre + ".Tag")
		if err != nil {
			return err
		}
		if len(tags) > maxTags {
			return ec2Err("TagLimitExceeded", "The maximum number of Tags for a resource has been reached (%d).", maxTags)
		}
		switch rt := p.Get(pre + ".ResourceType"); rt {
		case "instance":
			req.instanceTags = append(req.instanceTags, tags...)
		case "volume":
			req.volumeTags = append(req.volumeTags, tags...)
		case "spot-instances-request", "network-interface":
			// Accepted as EC2 does; the fake keeps no such resources.
		case "":
			return ec2Err("InvalidParameterValue", "%s.ResourceType is required.", pre)
		default:
			return ec2Err("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", rt)
		}
	}
	return nil
}

func parseMarket(p params, req *runRequest) error {
	switch mt := p.Get("InstanceMarketOptions.MarketType"); mt {
	case "":
		if p.Get("InstanceMarketOptions.SpotOptions.MaxPrice") != "" {
			return ec2Err("InvalidParameterCombination", "SpotOptions need InstanceMarketOptions.MarketType spot.")
		}
		return nil
	case "spot":
		req.spot = true
	default:
		return ec2Err("InvalidParameterValue", "Invalid value '%s' for InstanceMarketOptions.MarketType (spot or capacity-block).", mt)
	}
	const pre = "InstanceMarketOptions.SpotOptions."
	req.spotType = p.Get(pre + "SpotInstanceType")
	req.interruptBehaviour = p.Get(pre + "InstanceInterruptionBehavior")
	if req.spotType == "" {
		req.spotType = "one-time"
	}
	if req.interruptBehaviour == "" {
		req.interruptBehaviour = "terminate"
	}
	if req.spotType != "one-time" || req.interruptBehaviour != "terminate" {
		return ec2Err("InvalidParameterCombination", "The fake rents one-time spot instances that terminate on interruption, not %s/%s.", req.spotType, req.interruptBehaviour)
	}
	if mp := p.Get(pre + "MaxPrice"); mp != "" {
		v, err := strconv.ParseFloat(mp, 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) {
			return ec2Err("InvalidParameterValue", "Invalid value '%s' for MaxPrice.", mp)
		}
		req.maxPrice = v
	}
	return nil
}

// idempotencyKey is a request's parameters but its token and dry-run flag.
func idempotencyKey(p params) string {
	keys := make([]string, 0, len(p.Values))
	for k := range p.Values {
		if k != "ClientToken" && k != "DryRun" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q&", k, p.Values[k])
	}
	return b.String()
}

// quotaCode is the vCPU quota an instance type counts against in a market, or "" for the
// families the fake does not limit.
func quotaCode(typ string, spot bool) string {
	fam, _, _ := strings.Cut(strings.ToLower(typ), ".")
	var bucket string
	switch {
	case strings.HasPrefix(fam, "inf"), strings.HasPrefix(fam, "trn"), strings.HasPrefix(fam, "dl"),
		strings.HasPrefix(fam, "hpc"), strings.HasPrefix(fam, "mac"), strings.HasPrefix(fam, "u-"), fam == "":
		return ""
	case fam[0] == 'p':
		bucket = "p"
	case fam[0] == 'g', strings.HasPrefix(fam, "vt"):
		bucket = "g"
	case strings.ContainsRune("acdhimrtz", rune(fam[0])):
		bucket = "standard"
	default:
		return ""
	}
	codes := map[string][2]string{
		"standard": {QuotaOnDemandStandard, QuotaSpotStandard},
		"p":        {QuotaOnDemandP, QuotaSpotP},
		"g":        {QuotaOnDemandG, QuotaSpotG},
	}[bucket]
	if spot {
		return codes[1]
	}
	return codes[0]
}

// fitQuotaLocked says how many of the request's instances its vCPU quota lets start: MaxCount,
// or fewer down to MinCount, as EC2 does.
func (s *Server) fitQuotaLocked(req runRequest, it InstanceType) (int, error) {
	code := quotaCode(req.typ, req.spot)
	if code == "" {
		return req.max, nil
	}
	limit := s.quotas[code]
	used := 0
	for _, in := range s.order {
		if quotaCode(in.Type, in.Market == MarketSpot) == code && holdsVCPUs(in.State) {
			used += s.types[in.Type].VCPUs
		}
	}
	fit := int(math.Floor((limit - float64(used)) / float64(it.VCPUs)))
	if fit >= req.max {
		return req.max, nil
	}
	if fit >= req.min {
		return fit, nil
	}
	if req.spot {
		return 0, ec2Err("MaxSpotInstanceCountExceeded", "Max spot instance count exceeded (quota %s: %v vCPUs, %d in use, %d asked).", code, limit, used, req.min*it.VCPUs)
	}
	return 0, ec2Err("VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit of %v allows for the instance bucket that the specified instance type belongs to (quota %s, %d vCPUs in use). Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.", limit, code, used)
}

// holdsVCPUs: an instance counts against its quota until it has stopped or terminated.
func holdsVCPUs(state string) bool {
	return state != StateTerminated && state != StateStopped
}
