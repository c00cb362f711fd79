// Package ec2sim is a fake EC2 for tests: an HTTP server on loopback that speaks the EC2 Query
// API (and the Pricing and Service Quotas JSON APIs) to the real aws-sdk-go-v2, whose instances
// really boot.
//
// A test starts it with Start and points the SDK at it through the SDK's own endpoint
// variables (EndpointEnv: AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL_PRICING,
// AWS_ENDPOINT_URL_SERVICE_QUOTAS), with credentials and AWS_REGION in the environment and
// AWS_EC2_METADATA_DISABLED=true so that the driver never looks for a real IMDS (ClientEnv is
// all of these). Leave the SDK
// its own HTTP client (awshttp.NewBuildableClient, the default): on machines where AWS_CA_BUNDLE
// is set, a plain *http.Client makes config.LoadDefaultConfig fail.
//
// The actions served are RunInstances, DescribeInstances, TerminateInstances, CreateTags,
// DescribeSpotPriceHistory, DescribeInstanceTypes, DescribeSubnets, CreateSecurityGroup,
// AuthorizeSecurityGroupIngress, DescribeSecurityGroups and DeleteSecurityGroup (EC2),
// GetProducts (Pricing) and GetServiceQuota (Service Quotas), with EC2's XML shapes, error codes
// and HTTP statuses.
// Requests must be SigV4-signed for the right service and for Config.Region (Pricing: us-east-1,
// eu-central-1 or ap-south-1); signatures themselves are not checked.
//
// An instance is pending for the boot delay, then running: its IMDSv2 endpoint starts (one
// listener per instance) and its user-data, when it is a script (#!), runs as a local process
// in its own process group, in the instance's directory under Config.Dir, with its output in
// console.log there and AWS_EC2_METADATA_SERVICE_ENDPOINT pointing at its IMDS. The process
// gets a small environment (PATH, HOME, the IMDS endpoint, Config.Env), not the test's.
//
// Unlike EC2, where user-data finishing means nothing, here the user-data process is the
// instance's operating system: when it exits the instance shuts itself down, as `shutdown -h`
// would, ending terminated or stopped by its InstanceInitiatedShutdownBehavior (EC2's default,
// stop, when none was given) with reason Client.InstanceInitiatedShutdown. That is how an
// on-node watchdog's shutdown is modelled, so user-data must run its agent in the foreground.
// TerminateInstances (or Close) sends the process group SIGTERM, then SIGKILL after
// Config.KillGrace; the instance is shutting-down until the group is gone, then terminated
// (reason Client.UserInitiatedShutdown). A process that leaves its process group (setsid) is
// not followed.
//
// Security groups are the ones the fake made, in its one VPC (the default one): an instance
// holds each of its groups until it is terminated, and deleting one meanwhile is a
// DependencyViolation, as on EC2. A group id the fake never made stands for one that existed
// before (a spec's own) and is accepted by RunInstances; one it deleted is not.
//
// Faults are injected with FailCapacity, Throttle, NeverBoot, Interrupt, RecommendRebalance,
// SetQuota, SetSpotPrice and Deny; Instances, SecurityGroups, Calls and Actions (each call's
// IAM action) show what happened, and WaitState waits for a state. Terminated instances stay listed (EC2 forgets them after about an hour).
//
// Every instance is this machine: its private address is 127.0.0.1, so the agents that
// user-data starts must not share ports.
package ec2sim
