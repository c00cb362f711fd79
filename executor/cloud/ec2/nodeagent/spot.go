package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Notice is a spot interruption notice, as IMDS serves it at spot/instance-action.
type Notice struct {
	Action string `json:"action"` // terminate, stop or hibernate
	Time   string `json:"time"`   // when EC2 acts, RFC 3339
}

func (n Notice) String() string {
	return fmt.Sprintf("spot interruption notice: EC2 will %s this instance at %s", n.Action, n.Time)
}

// WatchSpot polls the instance's IMDSv2 every interval until a spot interruption notice comes
// (it returns it) or ctx ends (it returns ctx's error). A rebalance recommendation, an earlier
// sign of elevated risk, is passed to rebalance once and does not end the watch. IMDS being
// unreachable is said once, through problem, and the watch goes on: a notice missed here is
// still caught by the driver, which sees the instance gone.
func WatchSpot(ctx context.Context, endpoint string, interval time.Duration, rebalance, problem func(string)) (Notice, error) {
	c := imds.New(imds.Options{Endpoint: endpoint})
	told, rebalanced := false, false
	for {
		body, found, err := getMetadata(ctx, c, "spot/instance-action")
		switch {
		case err != nil && ctx.Err() == nil && !told:
			told = true
			problem(fmt.Sprintf("cannot read the spot interruption notice from IMDS: %v", err))
		case found:
			var n Notice
			if jerr := json.Unmarshal([]byte(body), &n); jerr != nil || n.Action == "" {
				n = Notice{Action: "terminate", Time: body} // still a notice: act on it
			}
			return n, nil
		}
		if !rebalanced {
			if body, found, _ := getMetadata(ctx, c, "events/recommendations/rebalance"); found {
				rebalanced = true
				rebalance("rebalance recommendation (elevated risk of a spot interruption): " + body)
			}
		}
		select {
		case <-ctx.Done():
			return Notice{}, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// getMetadata reads one metadata path: found false (and no error) when IMDS answers 404, as it
// does for a notice not given.
func getMetadata(ctx context.Context, c *imds.Client, path string) (string, bool, error) {
	out, err := c.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == 404 {
			return "", false, nil
		}
		return "", false, err
	}
	defer out.Content.Close()
	b, err := io.ReadAll(io.LimitReader(out.Content, 64<<10))
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}
