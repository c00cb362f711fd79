package ec2sim

import (
	"encoding/xml"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
)

// SecurityGroup is a snapshot of a security group the fake made (CreateSecurityGroup), for
// assertions.
type SecurityGroup struct {
	ID          string
	Name        string
	Description string
	VpcID       string
	Tags        map[string]string
	// Ingress are its inbound rules, one source each, in the order they were authorized.
	Ingress []Rule
}

// Rule is one inbound rule: a protocol ("tcp", "udp", "icmp", or "-1" for all), a port range
// (-1 for all protocols), and one source, a CIDR block or a security group.
type Rule struct {
	Protocol         string
	FromPort, ToPort int
	CIDR             string
	Group            string
}

// group is the fake's record of a security group; guarded by Server.mu.
type group struct {
	SecurityGroup
	seq int
}

func (g *group) snapshot() SecurityGroup {
	out := g.SecurityGroup
	out.Tags = maps.Clone(g.Tags)
	out.Ingress = slices.Clone(g.Ingress)
	return out
}

// SecurityGroups is a snapshot of the security groups that exist, in creation order.
func (s *Server) SecurityGroups() []SecurityGroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SecurityGroup, 0, len(s.groupOrder))
	for _, g := range s.groupOrder {
		out = append(out, g.snapshot())
	}
	return out
}

// groupKnownLocked says whether an instance may name group id: one the fake made and has not
// deleted, or one it never made, which stands for a group that existed before (such as a
// spec's own); a deleted one is gone, as on EC2.
func (s *Server) groupKnownLocked(id string) bool {
	return s.groups[id] != nil || !s.deletedGroups[id]
}

func (s *Server) createSecurityGroup(p params) (response, error) {
	name, desc := p.Get("GroupName"), p.Get("GroupDescription")
	switch {
	case name == "":
		return nil, ec2Err("MissingParameter", "The request must contain the parameter GroupName")
	case desc == "":
		return nil, ec2Err("MissingParameter", "The request must contain the parameter GroupDescription")
	case len(name) > 255 || len(desc) > 255:
		return nil, ec2Err("InvalidParameterValue", "Group names and descriptions are at most 255 characters long.")
	case strings.HasPrefix(name, "sg-"):
		return nil, ec2Err("InvalidParameterValue", "Group names may not be in the format sg-*.")
	}
	vpc := p.Get("VpcId")
	if vpc == "" {
		vpc = vpcID // the default VPC's
	} else if vpc != vpcID {
		return nil, ec2Err("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", vpc)
	}
	var tags []tag
	for _, n := range p.indices("TagSpecification") {
		pre := fmt.Sprintf("TagSpecification.%d", n)
		if rt := p.Get(pre + ".ResourceType"); rt != "security-group" {
			return nil, ec2Err("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", rt)
		}
		ts, err := p.tags(pre + ".Tag")
		if err != nil {
			return nil, err
		}
		tags = append(tags, ts...)
	}
	if err := p.dryRun(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groupOrder {
		if g.Name == name && g.VpcID == vpc {
			return nil, ec2Err("InvalidGroup.Duplicate", "The security group '%s' already exists for VPC '%s'", name, vpc)
		}
	}
	g := &group{SecurityGroup: SecurityGroup{ID: randomID("sg"), Name: name, Description: desc, VpcID: vpc, Tags: map[string]string{}}}
	if err := applyTags(g.Tags, tags); err != nil {
		return nil, err
	}
	s.groupSeq++
	g.seq = s.groupSeq
	s.groups[g.ID] = g
	s.groupOrder = append(s.groupOrder, g)
	return &createSecurityGroupResponse{GroupID: g.ID, Arn: groupArn(s.cfg.Region, g.ID), Tags: xmlTags(g.Tags)}, nil
}

func groupArn(region, id string) string {
	return fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", region, AccountID, id)
}

// groupLocked finds a group the fake made by id, as EC2 answers for one it does not have.
func (s *Server) groupLocked(id string) (*group, error) {
	if !sgRE.MatchString(id) {
		return nil, ec2Err("InvalidGroupId.Malformed", "Invalid id: %q (expecting \"sg-...\")", id)
	}
	g := s.groups[id]
	if g == nil {
		return nil, ec2Err("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	}
	return g, nil
}

// protocolNames are the protocol numbers and aliases EC2 takes for the names it answers with.
var protocolNames = map[string]string{"6": "tcp", "17": "udp", "1": "icmp", "all": "-1"}

// parseRules reads IpPermissions.N as the one-source rules they grant.
func parseRules(p params) ([]Rule, error) {
	var out []Rule
	for _, n := range p.indices("IpPermissions") {
		pre := fmt.Sprintf("IpPermissions.%d.", n)
		r := Rule{Protocol: strings.ToLower(p.Get(pre + "IpProtocol")), FromPort: -1, ToPort: -1}
		if name, ok := protocolNames[r.Protocol]; ok {
			r.Protocol = name
		}
		switch r.Protocol {
		case "-1":
		case "tcp", "udp", "icmp":
			var err error
			if r.FromPort, err = p.integer(pre+"FromPort", -1); err != nil {
				return nil, err
			}
			if r.ToPort, err = p.integer(pre+"ToPort", -1); err != nil {
				return nil, err
			}
			if r.Protocol != "icmp" && (r.FromPort < 0 || r.ToPort > 65535 || r.FromPort > r.ToPort) {
				return nil, ec2Err("InvalidParameterValue", "Invalid port range %d-%d for %s (0 to 65535, from at most to).", r.FromPort, r.ToPort, r.Protocol)
			}
		case "":
			return nil, ec2Err("MissingParameter", "The request must contain the parameter %sIpProtocol", pre)
		default:
			return nil, ec2Err("InvalidParameterValue", "Invalid value '%s' for IP protocol.", r.Protocol)
		}
		sources := 0
		for _, m := range p.indices(pre + "IpRanges") {
			cidr := p.Get(fmt.Sprintf("%sIpRanges.%d.CidrIp", pre, m))
			if _, _, err := net.ParseCIDR(cidr); err != nil || strings.Contains(cidr, ":") {
				return nil, ec2Err("InvalidParameterValue", "CIDR block %s is malformed", cidr)
			}
			r.CIDR, r.Group = cidr, ""
			out = append(out, r)
			sources++
		}
		for _, m := range p.indices(pre + "Groups") {
			r.CIDR, r.Group = "", p.Get(fmt.Sprintf("%sGroups.%d.GroupId", pre, m))
			if r.Group == "" {
				return nil, ec2Err("MissingParameter", "%sGroups.%d needs a GroupId", pre, m)
			}
			out = append(out, r)
			sources++
		}
		if sources == 0 {
			return nil, ec2Err("MissingParameter", "%s needs a source: IpRanges or Groups", strings.TrimSuffix(pre, "."))
		}
	}
	if len(out) == 0 {
		return nil, ec2Err("MissingParameter", "The request must contain the parameter IpPermissions")
	}
	return out, nil
}

func (s *Server) authorizeSecurityGroupIngress(p params) (response, error) {
	id := p.Get("GroupId")
	if id == "" {
		return nil, ec2Err("MissingParameter", "The request must contain the parameter GroupId (the fake has no default VPC groups by name)")
	}
	rules, err := parseRules(p)
	if err != nil {
		return nil, err
	}
	dry, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.groupLocked(id)
	if err != nil {
		return nil, err
	}
	for i, r := range rules {
		if r.Group != "" {
			if _, err := s.groupLocked(r.Group); err != nil {
				return nil, err
			}
		}
		if slices.Contains(g.Ingress, r) || slices.Contains(rules[:i], r) {
			return nil, ec2Err("InvalidPermission.Duplicate", "the specified rule \"peer: %s, %s, from port: %d, to port: %d, ALLOW\" already exists", r.CIDR+r.Group, r.Protocol, r.FromPort, r.ToPort)
		}
	}
	if dry {
		return nil, dryRunOK()
	}
	g.Ingress = append(g.Ingress, rules...)
	return &authorizeIngressResponse{Return: true}, nil
}

func (s *Server) deleteSecurityGroup(p params) (response, error) {
	id := p.Get("GroupId")
	if id == "" {
		return nil, ec2Err("MissingParameter", "The request must contain the parameter GroupId (the fake has no default VPC groups by name)")
	}
	dry, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.groupLocked(id)
	if err != nil {
		return nil, err
	}
	// An instance holds its groups until it is terminated: shutting down is not enough.
	for _, in := range s.order {
		if in.State != StateTerminated && slices.Contains(in.SecurityGroups, id) {
			return nil, ec2Err("DependencyViolation", "resource %s has a dependent object", id)
		}
	}
	for _, other := range s.groupOrder {
		if other != g && slices.ContainsFunc(other.Ingress, func(r Rule) bool { return r.Group == id }) {
			return nil, ec2Err("DependencyViolation", "resource %s has a dependent object (a rule of %s)", id, other.ID)
		}
	}
	if dry {
		return nil, dryRunOK()
	}
	delete(s.groups, id)
	s.groupOrder = slices.DeleteFunc(s.groupOrder, func(x *group) bool { return x == g })
	s.deletedGroups[id] = true
	return &deleteSecurityGroupResponse{Return: true, GroupID: id}, nil
}

// groupFilterValues is a group's values for a DescribeSecurityGroups filter; ok is false for a
// name the fake does not know.
func groupFilterValues(g *group, name string) (vals []string, ok bool) {
	if key, ok := strings.CutPrefix(name, "tag:"); ok && key != "" {
		if v, ok := g.Tags[key]; ok {
			return []string{v}, true
		}
		return nil, true
	}
	switch name {
	case "group-id":
		return []string{g.ID}, true
	case "group-name":
		return []string{g.Name}, true
	case "description":
		return []string{g.Description}, true
	case "vpc-id":
		return []string{g.VpcID}, true
	case "owner-id":
		return []string{AccountID}, true
	case "tag-key":
		return slices.Sorted(maps.Keys(g.Tags)), true
	case "tag-value":
		return slices.Collect(maps.Values(g.Tags)), true
	}
	return nil, false
}

func (s *Server) describeSecurityGroups(p params) (response, error) {
	ids, names := p.list("GroupId"), p.list("GroupName")
	fs := p.filters()
	if err := checkFilters(fs, func(name string) bool {
		_, ok := groupFilterValues(&group{}, name)
		return ok
	}); err != nil {
		return nil, err
	}
	max, after, err := p.paging("groupIdSet", len(ids)+len(names) > 0)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if _, err := s.groupLocked(id); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(s.groupOrder, func(g *group) bool { return g.Name == n }) {
			return nil, ec2Err("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", n, vpcID)
		}
	}
	out := &describeSecurityGroupsResponse{}
	for _, g := range s.groupOrder {
		if g.seq <= after || (len(ids) > 0 && !slices.Contains(ids, g.ID)) || (len(names) > 0 && !slices.Contains(names, g.Name)) {
			continue
		}
		if !matchesAll(fs, func(name string) []string { v, _ := groupFilterValues(g, name); return v }) {
			continue
		}
		if max > 0 && len(out.Groups) == max {
			out.NextToken = pageToken(out.Groups[len(out.Groups)-1].seq)
			break
		}
		out.Groups = append(out.Groups, s.xmlGroupLocked(g))
	}
	return out, nil
}

// matchesAll: every filter matches (AND), each by any of its values (OR), the values of a
// filter name being what values says.
func matchesAll(fs []filter, values func(name string) []string) bool {
	for _, f := range fs {
		if !slices.ContainsFunc(values(f.name), func(v string) bool { return anyGlob(f.values, v) }) {
			return false
		}
	}
	return true
}

func (s *Server) describeSubnets(p params) (response, error) {
	ids := p.list("SubnetId")
	fs := p.filters()
	values := func(id string) func(string) []string {
		return func(name string) []string {
			switch name {
			case "subnet-id":
				return []string{id}
			case "vpc-id":
				return []string{vpcID}
			case "availability-zone":
				return []string{s.cfg.Subnets[id]}
			case "state":
				return []string{"available"}
			}
			return nil
		}
	}
	if err := checkFilters(fs, func(name string) bool { return values("")(name) != nil }); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if _, ok := s.cfg.Subnets[id]; !ok {
			return nil, ec2Err("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	if err := p.dryRun(); err != nil {
		return nil, err
	}
	all := slices.Sorted(maps.Keys(s.cfg.Subnets))
	out := &describeSubnetsResponse{}
	for i, id := range all {
		if (len(ids) > 0 && !slices.Contains(ids, id)) || !matchesAll(fs, values(id)) {
			continue
		}
		out.Subnets = append(out.Subnets, xmlSubnet{ID: id, Arn: fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", s.cfg.Region, AccountID, id),
			State: "available", VpcID: vpcID, CIDR: "10.0." + strconv.Itoa(16*i) + ".0/20", Free: 4091, AZ: s.cfg.Subnets[id], Owner: AccountID})
	}
	return out, nil
}

type createSecurityGroupResponse struct {
	XMLName xml.Name `xml:"CreateSecurityGroupResponse"`
	respMeta
	Return  bool     `xml:"return"`
	GroupID string   `xml:"groupId"`
	Arn     string   `xml:"securityGroupArn"`
	Tags    []xmlTag `xml:"tagSet>item"`
}

type authorizeIngressResponse struct {
	XMLName xml.Name `xml:"AuthorizeSecurityGroupIngressResponse"`
	respMeta
	Return bool `xml:"return"`
}

type deleteSecurityGroupResponse struct {
	XMLName xml.Name `xml:"DeleteSecurityGroupResponse"`
	respMeta
	Return  bool   `xml:"return"`
	GroupID string `xml:"groupId"`
}

type describeSecurityGroupsResponse struct {
	XMLName xml.Name `xml:"DescribeSecurityGroupsResponse"`
	respMeta
	Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}

type xmlSecurityGroup struct {
	seq         int
	OwnerID     string            `xml:"ownerId"`
	GroupID     string            `xml:"groupId"`
	GroupName   string            `xml:"groupName"`
	Description string            `xml:"groupDescription"`
	VpcID       string            `xml:"vpcId"`
	Arn         string            `xml:"securityGroupArn"`
	Ingress     []xmlIPPermission `xml:"ipPermissions>item"`
	Egress      []xmlIPPermission `xml:"ipPermissionsEgress>item"`
	Tags        []xmlTag          `xml:"tagSet>item"`
}

type xmlIPPermission struct {
	Protocol string         `xml:"ipProtocol"`
	FromPort *int           `xml:"fromPort,omitempty"`
	ToPort   *int           `xml:"toPort,omitempty"`
	Groups   []xmlGroupPair `xml:"groups>item"`
	Ranges   []xmlIPRange   `xml:"ipRanges>item"`
}

type xmlGroupPair struct {
	UserID  string `xml:"userId"`
	GroupID string `xml:"groupId"`
}

type xmlIPRange struct {
	CIDR string `xml:"cidrIp"`
}

type describeSubnetsResponse struct {
	XMLName xml.Name `xml:"DescribeSubnetsResponse"`
	respMeta
	Subnets []xmlSubnet `xml:"subnetSet>item"`
}

type xmlSubnet struct {
	ID    string `xml:"subnetId"`
	Arn   string `xml:"subnetArn"`
	State string `xml:"state"`
	VpcID string `xml:"vpcId"`
	CIDR  string `xml:"cidrBlock"`
	Free  int    `xml:"availableIpAddressCount"`
	AZ    string `xml:"availabilityZone"`
	Owner string `xml:"ownerId"`
}

// xmlGroupLocked is a group as DescribeSecurityGroups gives it: its rules grouped by protocol
// and ports, and the egress rule every new group gets (all traffic anywhere).
func (s *Server) xmlGroupLocked(g *group) xmlSecurityGroup {
	x := xmlSecurityGroup{seq: g.seq, OwnerID: AccountID, GroupID: g.ID, GroupName: g.Name, Description: g.Description,
		VpcID: g.VpcID, Arn: groupArn(s.cfg.Region, g.ID), Tags: xmlTags(g.Tags),
		Egress: []xmlIPPermission{{Protocol: "-1", Ranges: []xmlIPRange{{"0.0.0.0/0"}}}}}
	index := map[[3]string]int{}
	for _, r := range g.Ingress {
		k := [3]string{r.Protocol, strconv.Itoa(r.FromPort), strconv.Itoa(r.ToPort)}
		i, ok := index[k]
		if !ok {
			i = len(x.Ingress)
			index[k] = i
			perm := xmlIPPermission{Protocol: r.Protocol}
			if r.Protocol != "-1" {
				from, to := r.FromPort, r.ToPort
				perm.FromPort, perm.ToPort = &from, &to
			}
			x.Ingress = append(x.Ingress, perm)
		}
		if r.Group != "" {
			x.Ingress[i].Groups = append(x.Ingress[i].Groups, xmlGroupPair{UserID: AccountID, GroupID: r.Group})
		} else {
			x.Ingress[i].Ranges = append(x.Ingress[i].Ranges, xmlIPRange{r.CIDR})
		}
	}
	return x
}

var (
	_ response = (*createSecurityGroupResponse)(nil)
	_ response = (*authorizeIngressResponse)(nil)
	_ response = (*deleteSecurityGroupResponse)(nil)
	_ response = (*describeSecurityGroupsResponse)(nil)
	_ response = (*describeSubnetsResponse)(nil)
)
