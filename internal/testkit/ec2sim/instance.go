package ec2sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Instance states, as EC2 names them.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
)

// stateCode is EC2's code of a state (the low byte of instanceState/code).
func stateCode(state string) int {
	switch state {
	case StatePending:
		return 0
	case StateRunning:
		return 16
	case StateShuttingDown:
		return 32
	case StateTerminated:
		return 48
	case StateStopping:
		return 64
	case StateStopped:
		return 80
	}
	return -1
}

// State reasons (stateReason/code) the fake gives.
const (
	ReasonUserInitiated     = "Client.UserInitiatedShutdown"     // TerminateInstances (or Close)
	ReasonInstanceInitiated = "Client.InstanceInitiatedShutdown" // the user-data process exited
	ReasonSpotTermination   = "Server.SpotInstanceTermination"   // Interrupt's notice ran out
)

// reasonMessage is EC2's stateReason/message for a reason code.
func reasonMessage(code string) string {
	switch code {
	case ReasonUserInitiated:
		return "Client.UserInitiatedShutdown: User initiated shutdown"
	case ReasonInstanceInitiated:
		return "Client.InstanceInitiatedShutdown: Instance initiated shutdown"
	case ReasonSpotTermination:
		return "Server.SpotInstanceTermination: Spot instance termination"
	}
	return code
}

// Markets.
const (
	MarketOnDemand = "on-demand"
	MarketSpot     = "spot"
)

// Instance is a snapshot of one instance, for assertions.
type Instance struct {
	ID            string
	ReservationID string
	ImageID       string
	Type          string
	AZ            string
	SubnetID      string
	State         string
	// StateReason is the reason code of the last shutdown (Reason* constants), "" before one.
	StateReason string
	// Market is MarketOnDemand or MarketSpot; spot instances have a SpotRequestID and the
	// MaxPrice they were requested with.
	Market        string
	SpotRequestID string
	MaxPrice      float64
	// Tags are the instance's, VolumeTags its root volume's (VolumeID).
	Tags       map[string]string
	VolumeID   string
	VolumeTags map[string]string
	// ClientToken is the RunInstances token that created it, "" when none was sent.
	ClientToken      string
	KeyName          string
	InstanceProfile  string
	SecurityGroups   []string
	ShutdownBehavior string
	UserData         []byte
	LaunchTime       time.Time
	// RunningTime is when it started running, zero until then; EndTime when it reached
	// terminated or stopped, zero until then.
	RunningTime time.Time
	EndTime     time.Time
	// Dir holds its user-data, console.log and working directory; IMDS is its metadata
	// endpoint ("" unless it runs); PID is its user-data process, 0 when none ran.
	Dir  string
	IMDS string
	PID  int
}

// instance is the fake's record of one instance; its fields are guarded by Server.mu.
type instance struct {
	Instance
	seq        int
	amiIndex   int
	neverBoot  bool
	final      string // the state shutting down ends in: terminated or stopped
	transition string // stateTransitionReason
	halt       chan struct{}
	halted     bool
	interrupt  *time.Timer
	action     string // spot/instance-action, "" until an interruption notice
	rebalance  string // events/recommendations/rebalance, "" until recommended
}

func (in *instance) snapshot() Instance {
	out := in.Instance
	out.Tags = maps.Clone(in.Tags)
	out.VolumeTags = maps.Clone(in.VolumeTags)
	out.SecurityGroups = slices.Clone(in.SecurityGroups)
	out.UserData = slices.Clone(in.UserData)
	return out
}

// live drives one instance from pending to its end: it boots after delay (never, for a NeverBoot
// instance), runs the user-data, and shuts down when the user-data exits or someone halts it.
func (s *Server) live(in *instance, delay time.Duration) {
	defer s.wg.Done()
	var boot <-chan time.Time
	if !in.neverBoot {
		t := time.NewTimer(delay)
		defer t.Stop()
		boot = t.C
	}
	select {
	case <-boot:
	case <-in.halt:
		s.finish(in)
		return
	}
	md, err := s.startIMDS(in)
	if err != nil {
		s.console(in, "ec2sim: metadata service: %v", err)
	}
	s.mu.Lock()
	if in.halted {
		s.mu.Unlock()
		md.close()
		s.finish(in)
		return
	}
	in.State, in.RunningTime = StateRunning, time.Now().UTC()
	if md != nil {
		in.IMDS = md.url
	}
	s.notifyLocked()
	s.mu.Unlock()

	proc := s.startUserData(in)
	select {
	case <-proc.exited:
		s.mu.Lock()
		if !in.halted {
			// The watchdog's shutdown: the instance's own choice, with its shutdown behaviour.
			in.State, in.final = StateShuttingDown, StateTerminated
			if in.ShutdownBehavior == "stop" {
				in.State, in.final = StateStopping, StateStopped
			}
			in.StateReason = ReasonInstanceInitiated
			in.transition = fmt.Sprintf("User initiated (%s)", gmt(time.Now()))
			in.halted = true
			close(in.halt)
			s.notifyLocked()
		}
		s.mu.Unlock()
		s.console(in, "ec2sim: user-data exited (%s): instance-initiated shutdown", proc.status())
	case <-in.halt:
	}
	proc.kill(s.cfg.KillGrace)
	md.close()
	s.finish(in)
}

// finish ends a shutdown.
func (s *Server) finish(in *instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in.State, in.EndTime = in.final, time.Now().UTC()
	in.IMDS = ""
	s.notifyLocked()
}

type haltReason int

const (
	haltAPI haltReason = iota
	haltSpot
	haltClose
)

// haltLocked starts terminating an instance (TerminateInstances, an interruption, Close) and
// returns the state it was in.
func (s *Server) haltLocked(in *instance, why haltReason) string {
	prev := in.State
	if in.interrupt != nil && why != haltSpot {
		in.interrupt.Stop()
	}
	reason, transition := ReasonUserInitiated, fmt.Sprintf("User initiated (%s)", gmt(time.Now()))
	if why == haltSpot {
		reason, transition = ReasonSpotTermination, fmt.Sprintf("Service initiated (%s)", gmt(time.Now()))
	}
	switch in.State {
	case StateTerminated, StateShuttingDown:
		return prev
	case StateStopped:
		// Nothing runs on a stopped instance: it ends at once.
		in.State, in.EndTime = StateTerminated, time.Now().UTC()
		in.StateReason, in.transition = reason, transition
		s.notifyLocked()
		return prev
	case StateStopping:
		// Its processes are already being stopped; it ends terminated instead of stopped.
		in.State, in.final = StateShuttingDown, StateTerminated
		s.notifyLocked()
		return prev
	}
	in.State, in.final = StateShuttingDown, StateTerminated
	in.StateReason, in.transition = reason, transition
	if !in.halted {
		in.halted = true
		close(in.halt)
	}
	s.notifyLocked()
	return prev
}

func gmt(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 GMT") }

// Instances is a snapshot of every instance, terminated ones included, in launch order.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.order))
	for _, in := range s.order {
		out = append(out, in.snapshot())
	}
	return out
}

// WaitLaunched waits until at least n instances have been launched (in any state since).
func (s *Server) WaitLaunched(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		launched, changed := len(s.order), s.changed
		s.mu.Unlock()
		if launched >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("ec2sim: %d of %d instances launched: %w", launched, n, ctx.Err())
		}
	}
}

// WaitState waits until instance id is in state, and returns its snapshot then.
func (s *Server) WaitState(ctx context.Context, id, state string) (Instance, error) {
	for {
		s.mu.Lock()
		in, ok := s.instances[id]
		if !ok {
			s.mu.Unlock()
			return Instance{}, fmt.Errorf("ec2sim: no instance %s", id)
		}
		snap, changed := in.snapshot(), s.changed
		s.mu.Unlock()
		if snap.State == state {
			return snap, nil
		}
		if snap.State == StateTerminated {
			return snap, fmt.Errorf("ec2sim: instance %s is terminated (%s), never %s", id, snap.StateReason, state)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return snap, fmt.Errorf("ec2sim: instance %s is %s, not %s: %w", id, snap.State, state, ctx.Err())
		}
	}
}
