package ec2sim

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// capacityFault is a pending FailCapacity: the next left RunInstances into az fail with code.
type capacityFault struct {
	az, code string
	left     int
}

// spotOnly are the capacity codes that only a spot request can get.
func spotOnly(code string) bool {
	return code == "SpotMaxPriceTooLow" || code == "MaxSpotInstanceCountExceeded"
}

// FailCapacity makes the next n RunInstances into zone az (every zone when az is "") fail with
// code, such as InsufficientInstanceCapacity (HTTP 500, as EC2 answers it), SpotMaxPriceTooLow,
// MaxSpotInstanceCountExceeded or Unsupported (400). SpotMaxPriceTooLow and
// MaxSpotInstanceCountExceeded only hit spot requests, the others any. Every attempt counts,
// dry runs and ClientToken replays of a request that succeeded excepted: the SDK's standard
// retryer retries a 500 (three attempts in all by default), so n = 1 with
// InsufficientInstanceCapacity fails one attempt, and the SDK's retry then succeeds.
func (s *Server) FailCapacity(az, code string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capacity = append(s.capacity, capacityFault{az: az, code: code, left: n})
}

func (s *Server) takeCapacityFaultLocked(req runRequest) error {
	for i := range s.capacity {
		f := &s.capacity[i]
		if f.left <= 0 || (f.az != "" && f.az != req.az) || (spotOnly(f.code) && !req.spot) {
			continue
		}
		f.left--
		code := f.code
		s.capacity = slices.DeleteFunc(s.capacity, func(f capacityFault) bool { return f.left <= 0 })
		return capacityError(code, req, s.zones)
	}
	return nil
}

func capacityError(code string, req runRequest, zones []string) error {
	switch code {
	case "InsufficientInstanceCapacity":
		return ec2Err(code, "We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an Availability Zone in your request or choosing %s.", req.typ, req.az, req.typ, otherZones(zones, req.az))
	case "SpotMaxPriceTooLow":
		return ec2Err(code, "Your Spot request price is lower than the minimum required Spot request fulfillment price.")
	case "MaxSpotInstanceCountExceeded":
		return ec2Err(code, "Max spot instance count exceeded")
	case "Unsupported":
		return ec2Err(code, "Your requested instance type (%s) is not supported in your requested Availability Zone (%s). Please retry your request by not specifying an Availability Zone or choosing %s.", req.typ, req.az, otherZones(zones, req.az))
	}
	return ec2Err(code, "Injected by ec2sim.FailCapacity.")
}

func otherZones(zones []string, az string) string {
	var out string
	for _, z := range zones {
		if z != az {
			if out != "" {
				out += ", "
			}
			out += z
		}
	}
	return out
}

// Throttle makes the next n requests, of any action and service, fail as throttled:
// RequestLimitExceeded (HTTP 503) for EC2, ThrottlingException for Pricing,
// TooManyRequestsException for Service Quotas. The SDK's retryers retry all three.
func (s *Server) Throttle(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle += n
}

func (s *Server) takeThrottle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.throttle > 0 {
		s.throttle--
		return true
	}
	return false
}

// StallRunInstances holds the answer of each of the next len(d) RunInstances that rent
// instances for the duration given, after renting them: a client that dies meanwhile has rented
// instances it never learnt of (what a ClientToken replay recovers). Close ends a stall.
func (s *Server) StallRunInstances(d ...time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalls = append(s.stalls, d...)
}

// takeStallLocked is how long to hold the answer of a RunInstances that just rented.
func (s *Server) takeStallLocked() time.Duration {
	if len(s.stalls) == 0 {
		return 0
	}
	d := s.stalls[0]
	s.stalls = s.stalls[1:]
	return d
}

// NeverBoot makes the next n instances started stay pending until terminated.
func (s *Server) NeverBoot(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.neverBoot += n
}

// SetQuota sets a vCPU quota by its Service Quotas code (the Quota* constants), for
// GetServiceQuota and for RunInstances, which refuses instances past it: VcpuLimitExceeded
// on-demand, MaxSpotInstanceCountExceeded on spot. Instances already running are not touched.
func (s *Server) SetQuota(code string, vcpus float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quotas[code] = vcpus
}

// Deny makes every request of action ("RunInstances", "GetProducts", ...) fail as unauthorized
// (EC2's UnauthorizedOperation, HTTP 403, dry runs included: that is how a preflight learns the
// caller may not launch), or lets it through again.
func (s *Server) Deny(action string, deny bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denied[action] = deny
}

func (s *Server) isDenied(action string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.denied[action]
}

// Interrupt interrupts a spot instance: at once, its IMDS serves the interruption notice
// (spot/instance-action, {"action":"terminate","time":NOW+notice}) and a rebalance
// recommendation; after notice the instance is terminated with reason
// Server.SpotInstanceTermination. The instance must be a pending or running spot instance.
func (s *Server) Interrupt(instanceID string, notice time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[instanceID]
	switch {
	case !ok:
		return fmt.Errorf("ec2sim: no instance %s", instanceID)
	case in.Market != MarketSpot:
		return fmt.Errorf("ec2sim: instance %s is on-demand: only spot instances are interrupted", instanceID)
	case in.State != StatePending && in.State != StateRunning:
		return fmt.Errorf("ec2sim: instance %s is %s", instanceID, in.State)
	case in.interrupt != nil:
		return fmt.Errorf("ec2sim: instance %s is already interrupted", instanceID)
	}
	now := time.Now().UTC()
	action, _ := json.Marshal(map[string]string{"action": "terminate", "time": now.Add(notice).Format("2006-01-02T15:04:05Z")})
	in.action = string(action)
	if in.rebalance == "" {
		in.rebalance = rebalanceNotice(now)
	}
	in.interrupt = time.AfterFunc(notice, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.haltLocked(in, haltSpot)
	})
	s.notifyLocked()
	return nil
}

// RecommendRebalance serves a rebalance recommendation on a running spot instance's IMDS
// (events/recommendations/rebalance), without interrupting it.
func (s *Server) RecommendRebalance(instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[instanceID]
	if !ok || in.Market != MarketSpot {
		return fmt.Errorf("ec2sim: no spot instance %s", instanceID)
	}
	if in.rebalance == "" {
		in.rebalance = rebalanceNotice(time.Now().UTC())
	}
	return nil
}

func rebalanceNotice(t time.Time) string {
	b, _ := json.Marshal(map[string]string{"noticeTime": t.Format("2006-01-02T15:04:05Z")})
	return string(b)
}

// Calls is every request answered so far, in the order they were answered.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Actions are the IAM actions of every request answered so far (Call.IAMAction), sorted, each
// once: refused and dry-run requests count, since IAM is asked before either answer.
func (s *Server) Actions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		out = append(out, c.IAMAction())
	}
	slices.Sort(out)
	return slices.Compact(out)
}
