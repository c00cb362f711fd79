package ec2sim

import (
	"maps"
	"regexp"
	"strconv"
	"strings"
)

var instanceIDRE = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)

// instancesLocked finds instances by id, as EC2 does: all of them, or an error naming the ones
// that do not exist.
func (s *Server) instancesLocked(ids []string) ([]*instance, error) {
	var out []*instance
	var missing []string
	for _, id := range ids {
		if !instanceIDRE.MatchString(id) {
			return nil, ec2Err("InvalidInstanceID.Malformed", "Invalid id: %q", id)
		}
		in, ok := s.instances[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		out = append(out, in)
	}
	switch len(missing) {
	case 0:
		return out, nil
	case 1:
		return nil, ec2Err("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
	}
	return nil, ec2Err("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
}

// filterValues is an instance's values for a DescribeInstances filter name; ok is false for a
// name the fake does not know.
func filterValues(in *instance, name string) (vals []string, ok bool) {
	if key, ok := strings.CutPrefix(name, "tag:"); ok && key != "" {
		if v, ok := in.Tags[key]; ok {
			return []string{v}, true
		}
		return nil, true
	}
	one := func(v string) ([]string, bool) { return []string{v}, true }
	switch name {
	case "instance-state-name":
		return one(in.State)
	case "instance-state-code":
		return one(strconv.Itoa(stateCode(in.State)))
	case "availability-zone":
		return one(in.AZ)
	case "client-token":
		return one(in.ClientToken)
	case "instance-id":
		return one(in.ID)
	case "instance-type":
		return one(in.Type)
	case "image-id":
		return one(in.ImageID)
	case "subnet-id":
		return one(in.SubnetID)
	case "vpc-id":
		return one(vpcID)
	case "reservation-id":
		return one(in.ReservationID)
	case "key-name":
		return one(in.KeyName)
	case "spot-instance-request-id":
		return one(in.SpotRequestID)
	case "instance.group-id":
		return in.SecurityGroups, true
	case "tag-key":
		for k := range in.Tags {
			vals = append(vals, k)
		}
		return vals, true
	case "tag-value":
		for _, v := range in.Tags {
			vals = append(vals, v)
		}
		return vals, true
	case "instance-lifecycle":
		if in.Market == MarketSpot {
			return one("spot")
		}
		return nil, true // on-demand instances have no lifecycle, as in EC2
	}
	return nil, false
}

func checkFilters(fs []filter, known func(string) bool) error {
	for _, f := range fs {
		if !known(f.name) {
			return ec2Err("InvalidParameterValue", "The filter '%s' is invalid", f.name)
		}
		if len(f.values) == 0 {
			return ec2Err("InvalidParameterValue", "The filter '%s' needs at least one value", f.name)
		}
	}
	return nil
}

// matches: every filter matches (AND), each by any of its values (OR).
func matches(in *instance, fs []filter) bool {
	for _, f := range fs {
		vals, _ := filterValues(in, f.name)
		ok := false
		for _, v := range vals {
			if anyGlob(f.values, v) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (s *Server) describeInstances(p params) (response, error) {
	ids := p.list("InstanceId")
	fs := p.filters()
	if err := checkFilters(fs, func(name string) bool {
		_, ok := filterValues(&instance{}, name)
		return ok
	}); err != nil {
		return nil, err
	}
	max, after, err := p.paging("instancesSet", len(ids) > 0)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	candidates := s.order
	if len(ids) > 0 {
		if candidates, err = s.instancesLocked(ids); err != nil {
			return nil, err
		}
	}
	// Pages run in launch order and a token names the last instance given, so instances launched
	// between two pages neither repeat nor shift the rest.
	var page []*instance
	next := ""
	for _, in := range candidates {
		if in.seq <= after || !matches(in, fs) {
			continue
		}
		if max > 0 && len(page) == max {
			next = pageToken(page[len(page)-1].seq)
			break
		}
		page = append(page, in)
	}
	out := &describeInstancesResponse{NextToken: next}
	byRes := map[string]int{}
	for _, in := range page {
		i, ok := byRes[in.ReservationID]
		if !ok {
			i = len(out.Reservations)
			byRes[in.ReservationID] = i
			out.Reservations = append(out.Reservations, xmlReservation{ReservationID: in.ReservationID, OwnerID: AccountID})
		}
		out.Reservations[i].Instances = append(out.Reservations[i].Instances, s.xmlInstanceLocked(in))
	}
	for i := range out.Reservations {
		for _, g := range s.instances[out.Reservations[i].Instances[0].InstanceID].SecurityGroups {
			out.Reservations[i].Groups = append(out.Reservations[i].Groups, xmlGroup{GroupID: g, GroupName: g})
		}
	}
	return out, nil
}

func (s *Server) terminateInstances(p params) (response, error) {
	ids := p.list("InstanceId")
	if len(ids) == 0 {
		return nil, ec2Err("MissingParameter", "The request must contain the parameter InstanceId")
	}
	dry, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ins, err := s.instancesLocked(ids)
	if err != nil {
		return nil, err
	}
	if dry {
		return nil, dryRunOK()
	}
	out := &terminateInstancesResponse{}
	for _, in := range ins {
		prev := s.haltLocked(in, haltAPI)
		out.Changes = append(out.Changes, xmlStateChange{InstanceID: in.ID,
			CurrentState: xmlState{stateCode(in.State), in.State}, PreviousState: xmlState{stateCode(prev), prev}})
	}
	return out, nil
}

func (s *Server) createTags(p params) (response, error) {
	ids := p.list("ResourceId")
	if len(ids) == 0 {
		return nil, ec2Err("MissingParameter", "The request must contain the parameter ResourceId")
	}
	tags, err := p.tags("Tag")
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		return nil, ec2Err("MissingParameter", "The request must contain the parameter Tag")
	}
	dry, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var targets []map[string]string
	for _, id := range ids {
		switch {
		case strings.HasPrefix(id, "i-"):
			ins, err := s.instancesLocked([]string{id})
			if err != nil {
				return nil, err
			}
			targets = append(targets, ins[0].Tags)
		case strings.HasPrefix(id, "vol-"):
			in, ok := s.volumes[id]
			if !ok || in.State == StateTerminated {
				return nil, ec2Err("InvalidVolume.NotFound", "The volume '%s' does not exist.", id)
			}
			targets = append(targets, in.VolumeTags)
		default:
			return nil, ec2Err("InvalidID", "The ID '%s' is not valid", id)
		}
	}
	if dry {
		return nil, dryRunOK()
	}
	// Check every resource's limit before tagging any: the request succeeds or changes nothing.
	for _, m := range targets {
		if err := applyTags(maps.Clone(m), tags); err != nil {
			return nil, err
		}
	}
	for _, m := range targets {
		_ = applyTags(m, tags)
	}
	return &createTagsResponse{Return: true}, nil
}
