package spec

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// EC2 says where and how a run rents EC2 instances (--backend ec2). Credentials are never part
// of it: the provider takes them from the AWS SDK's default chain (environment, shared config,
// SSO, instance profile).
type EC2 struct {
	// Region is the AWS region ("us-east-1"); empty means the SDK's default (AWS_REGION, the
	// shared config).
	Region string `yaml:"region"`
	// AMI is the image every instance boots: it holds Nomad and rubberband (docs/spec.md).
	AMI string `yaml:"ami"`
	// Subnets are where instances start, one per availability zone, tried in order when a zone
	// has no capacity.
	Subnets []string `yaml:"subnets"`
	// SecurityGroups are more security groups for the instances, beside the run's own, which
	// the driver makes and deletes (it lets in the run's instances, and Nomad's ports from the
	// driver).
	SecurityGroups []string `yaml:"security_groups"`
	// InstanceProfile is an IAM instance profile, by name or ARN, that gives instances their
	// credentials (for s3:// checkpoints).
	InstanceProfile string `yaml:"instance_profile"`
	// KeyName is an EC2 key pair for SSH access; empty means none.
	KeyName string `yaml:"key_name"`
	// Tags are extra tags on every instance and volume, besides rubberband's own.
	Tags map[string]string `yaml:"tags"`
	// UserData is extra shell the instance runs, in a subshell, before rubberband's node agent
	// (which never returns) starts.
	UserData string `yaml:"user_data"`
	// Watchdog is how long an instance goes on without its driver's heartbeat before it shuts
	// itself down, and, started with shutdown behaviour terminate, is terminated: a driver that
	// died for good or lost its network leaves nothing billing past it (default 15m).
	Watchdog Duration `yaml:"watchdog"`
}

// Watchdog bounds.
const (
	// DefaultWatchdog leaves a dead driver time to be resumed (a resume adopts the instances)
	// before its instances end themselves.
	DefaultWatchdog = Duration(15 * time.Minute)
	// MinWatchdog is three of the driver's heartbeats (one every 10 s): a shorter one would end
	// instances of a driver that is alive but slow to write one.
	MinWatchdog = Duration(30 * time.Second)
	MaxWatchdog = Duration(24 * time.Hour)
)

// EC2 limits.
const (
	// MaxEC2Tags leaves room, within EC2's 50 tags per resource, for rubberband's own:
	// rubberband:experiment, rubberband:run, rubberband:node and Name.
	MaxEC2Tags = 40
	// MaxTagKeyLen and MaxTagValueLen are EC2's, in characters.
	MaxTagKeyLen   = 128
	MaxTagValueLen = 256
	// MaxUserDataBytes is half of EC2's 16 KiB of user-data: rubberband's own part needs the rest.
	MaxUserDataBytes = 8 << 10
	// MaxSubnets bounds the subnets (one per availability zone; no region has this many).
	MaxSubnets = 32
	// MaxSecurityGroups leaves room, within EC2's 16 per network interface, for the run's own.
	MaxSecurityGroups = 15
	// MaxKeyNameLen is EC2's limit on a key pair's name.
	MaxKeyNameLen = 255
)

var (
	regionRE  = lazyRegexp(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	amiRE     = lazyRegexp(`^ami-[0-9a-f]{8,17}$`)
	subnetRE  = lazyRegexp(`^subnet-[0-9a-f]{8,17}$`)
	sgRE      = lazyRegexp(`^sg-[0-9a-f]{8,17}$`)
	profileRE = lazyRegexp(`^([\w+=,.@-]{1,128}|arn:aws[a-z-]*:iam::[0-9]{12}:instance-profile/([\w+=,.@-]+/)*[\w+=,.@-]{1,128})$`)
)

// reservedTag says why a tag key is rubberband's or AWS's, or "" when it is free. AWS reserves
// "aws:" in any case.
func reservedTag(k string) string {
	switch lower := strings.ToLower(k); {
	case strings.HasPrefix(lower, "aws:"):
		return "keys starting with aws: are AWS's"
	case strings.HasPrefix(lower, "rubberband:"):
		return "keys starting with rubberband: are rubberband's (experiment, run, node)"
	case k == "Name":
		return "rubberband names each instance after its node"
	}
	return ""
}

func (v *validator) ec2() {
	x := v.e.Cluster.EC2
	if x == nil {
		return
	}
	if v.e.Cluster.InstanceType == "" && !v.e.unknown("cluster.instance_type") {
		v.add("cluster.instance_type", "the ec2 block needs an instance type to rent (`rubberband catalog` lists them)")
	}
	if x.Region != "" && !regionRE().MatchString(x.Region) {
		v.add("cluster.ec2.region", "%q is not an AWS region (such as us-east-1)", x.Region)
	}
	if x.AMI == "" {
		v.add("cluster.ec2.ami", "is required: the image every instance boots (ami-0123456789abcdef0)")
	} else if !amiRE().MatchString(x.AMI) {
		v.add("cluster.ec2.ami", "%q is not an AMI id (ami- and 8 to 17 hexadecimal digits)", x.AMI)
	}
	switch {
	case len(x.Subnets) == 0:
		v.add("cluster.ec2.subnets", "needs at least one subnet (one per availability zone to use)")
	case len(x.Subnets) > MaxSubnets:
		v.add("cluster.ec2.subnets", "holds %d subnets (at most %d)", len(x.Subnets), MaxSubnets)
	default:
		v.ids("cluster.ec2.subnets", x.Subnets, subnetRE(), "a subnet id (subnet- and 8 to 17 hexadecimal digits)")
	}
	if len(x.SecurityGroups) > MaxSecurityGroups {
		v.add("cluster.ec2.security_groups", "holds %d security groups (at most %d)", len(x.SecurityGroups), MaxSecurityGroups)
	} else {
		v.ids("cluster.ec2.security_groups", x.SecurityGroups, sgRE(), "a security group id (sg- and 8 to 17 hexadecimal digits)")
	}
	if x.InstanceProfile != "" && !profileRE().MatchString(x.InstanceProfile) {
		v.add("cluster.ec2.instance_profile", "%q is not an instance profile name or ARN (arn:aws:iam::123456789012:instance-profile/NAME)", x.InstanceProfile)
	}
	if len(x.KeyName) > MaxKeyNameLen || strings.ContainsFunc(x.KeyName, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		v.add("cluster.ec2.key_name", "is not a key pair name (at most %d printable ASCII characters)", MaxKeyNameLen)
	}
	if len(x.Tags) > MaxEC2Tags {
		v.add("cluster.ec2.tags", "holds %d tags (at most %d: EC2 allows 50, and rubberband sets its own)", len(x.Tags), MaxEC2Tags)
	} else {
		for _, k := range sortedKeys(x.Tags) {
			path := "cluster.ec2.tags." + k
			switch n := utf8.RuneCountInString(k); {
			case n == 0 || n > MaxTagKeyLen:
				v.add(path, "the key is %d characters long (1 to %d)", n, MaxTagKeyLen)
			case reservedTag(k) != "":
				v.add(path, "reserved: %s", reservedTag(k))
			case utf8.RuneCountInString(x.Tags[k]) > MaxTagValueLen:
				v.add(path, "the value is %d characters long (at most %d)", utf8.RuneCountInString(x.Tags[k]), MaxTagValueLen)
			}
		}
	}
	if x.Watchdog < MinWatchdog || x.Watchdog > MaxWatchdog {
		v.add("cluster.ec2.watchdog", "%s is out of range (%s to %s)", x.Watchdog.D(), MinWatchdog.D(), MaxWatchdog.D())
	}
	if len(x.UserData) > MaxUserDataBytes {
		v.add("cluster.ec2.user_data", "is %d bytes (at most %d: EC2 takes 16 KiB of user-data, and rubberband's own needs the rest)", len(x.UserData), MaxUserDataBytes)
	}
}

// ids checks a list of resource ids: each well formed, none twice.
func (v *validator) ids(path string, ids []string, re *regexp.Regexp, what string) {
	seen := map[string]int{}
	for i, id := range ids {
		p := fmt.Sprintf("%s[%d]", path, i)
		if j, ok := seen[id]; ok {
			v.add(p, "%q is given twice (also at [%d])", id, j)
			continue
		}
		seen[id] = i
		if !re.MatchString(id) {
			v.add(p, "%q is not %s", id, what)
		}
	}
}
