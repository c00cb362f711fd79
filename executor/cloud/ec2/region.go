package ec2

import "regexp"

var regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// IsRegion says whether name has the shape of an AWS region's name, such as us-east-1.
func IsRegion(name string) bool { return regionRE.MatchString(name) }
