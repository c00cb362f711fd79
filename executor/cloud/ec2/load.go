package ec2

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
)

// DefaultRegion is the region of a command that names none when the SDK's chain names none
// either: the Price List API's own, and the catalog's prices are its.
const DefaultRegion = "us-east-1"

// LoadConfig is the SDK's default configuration chain (environment, shared config and
// credentials, SSO, instance profile) in region; with region empty, the chain's own region
// (AWS_REGION, the profile's), else DefaultRegion. It sets no retryer: Prices and Cleanup
// add their own to a config that has none. It makes no call to AWS.
func LoadConfig(ctx context.Context, region string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	// The SDK's own logger says what its callers say better, or not at all: looking for
	// credentials off EC2, it warned of "falling back to IMDSv1" on every command; the
	// failures it comes to reach the caller as errors.
	opts = append(opts, config.WithLogger(logging.Nop{}))
	// The SDK keeps its own buildable HTTP client: a plain *http.Client fails where
	// AWS_CA_BUNDLE is set.
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("ec2: load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	return cfg, nil
}

// quickRetryer is the adaptive retryer with few attempts and short waits: a price lookup that
// cannot reach AWS should fall back to the catalog in seconds, not after the provider's
// minute of retries; throttling is still retried.
func quickRetryer() aws.Retryer {
	return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
		o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) {
			so.MaxAttempts = 4
			so.MaxBackoff = time.Second
		})
	})
}
