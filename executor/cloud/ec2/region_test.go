package ec2

import "testing"

func TestIsRegion(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{"us-east-1": true, "ap-southeast-2": true, "us-gov-west-1": true, "useast1": false, "US-EAST-1": false, "us-east": false, "": false} {
		if got := IsRegion(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
}
