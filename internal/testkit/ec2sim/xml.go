package ec2sim

import (
	"encoding/xml"
	"sort"
	"strings"
)

// The XML shapes of EC2's instance responses, named as the SDK's deserializers read them.

func xmlName(local string) xml.Name { return xml.Name{Local: local} }

type runInstancesResponse struct {
	XMLName xml.Name
	respMeta
	xmlReservation
}

type describeInstancesResponse struct {
	XMLName xml.Name `xml:"DescribeInstancesResponse"`
	respMeta
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

type terminateInstancesResponse struct {
	XMLName xml.Name `xml:"TerminateInstancesResponse"`
	respMeta
	Changes []xmlStateChange `xml:"instancesSet>item"`
}

type createTagsResponse struct {
	XMLName xml.Name `xml:"CreateTagsResponse"`
	respMeta
	Return bool `xml:"return"`
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Groups        []xmlGroup    `xml:"groupSet>item"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xmlState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xmlStateChange struct {
	InstanceID    string   `xml:"instanceId"`
	CurrentState  xmlState `xml:"currentState"`
	PreviousState xmlState `xml:"previousState"`
}

type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xmlInstance struct {
	InstanceID            string            `xml:"instanceId"`
	ImageID               string            `xml:"imageId"`
	State                 xmlState          `xml:"instanceState"`
	PrivateDNSName        string            `xml:"privateDnsName"`
	DNSName               string            `xml:"dnsName"`
	Reason                string            `xml:"reason"`
	KeyName               string            `xml:"keyName,omitempty"`
	AMILaunchIndex        int               `xml:"amiLaunchIndex"`
	InstanceType          string            `xml:"instanceType"`
	LaunchTime            string            `xml:"launchTime"`
	Placement             xmlPlacement      `xml:"placement"`
	Monitoring            string            `xml:"monitoring>state"`
	SubnetID              string            `xml:"subnetId,omitempty"`
	VpcID                 string            `xml:"vpcId,omitempty"`
	PrivateIPAddress      string            `xml:"privateIpAddress,omitempty"`
	Groups                []xmlGroup        `xml:"groupSet>item"`
	StateReason           *xmlStateReason   `xml:"stateReason,omitempty"`
	Architecture          string            `xml:"architecture"`
	RootDeviceType        string            `xml:"rootDeviceType"`
	RootDeviceName        string            `xml:"rootDeviceName"`
	BlockDevices          []xmlBlockDevice  `xml:"blockDeviceMapping>item"`
	InstanceLifecycle     string            `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string            `xml:"spotInstanceRequestId,omitempty"`
	VirtualizationType    string            `xml:"virtualizationType"`
	ClientToken           string            `xml:"clientToken,omitempty"`
	Tags                  []xmlTag          `xml:"tagSet>item"`
	Hypervisor            string            `xml:"hypervisor"`
	IamInstanceProfile    *xmlProfile       `xml:"iamInstanceProfile,omitempty"`
	CapacityReservation   *xmlCapacityPrefs `xml:"capacityReservationSpecification,omitempty"`
}

type xmlPlacement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	Tenancy          string `xml:"tenancy"`
}

type xmlStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xmlBlockDevice struct {
	DeviceName string `xml:"deviceName"`
	Ebs        struct {
		VolumeID            string `xml:"volumeId"`
		Status              string `xml:"status"`
		AttachTime          string `xml:"attachTime"`
		DeleteOnTermination bool   `xml:"deleteOnTermination"`
	} `xml:"ebs"`
}

type xmlProfile struct {
	Arn string `xml:"arn"`
	ID  string `xml:"id"`
}

type xmlCapacityPrefs struct {
	Preference string `xml:"capacityReservationPreference"`
}

// vpcID is the one VPC all of the fake's subnets are in.
const vpcID = "vpc-0ec25100000000001"

func (s *Server) xmlReservationLocked(res *reservation, ins []*instance) xmlReservation {
	out := xmlReservation{ReservationID: res.id, OwnerID: AccountID}
	for _, g := range res.groups {
		out.Groups = append(out.Groups, xmlGroup{GroupID: g, GroupName: g})
	}
	for _, in := range ins {
		out.Instances = append(out.Instances, s.xmlInstanceLocked(in))
	}
	return out
}

func (s *Server) xmlInstanceLocked(in *instance) xmlInstance {
	x := xmlInstance{
		InstanceID: in.ID, ImageID: in.ImageID, State: xmlState{stateCode(in.State), in.State},
		PrivateDNSName: "ip-127-0-0-1.ec2.internal", Reason: in.transition, KeyName: in.KeyName,
		AMILaunchIndex: in.amiIndex, InstanceType: in.Type, LaunchTime: ec2Time(in.LaunchTime),
		Placement: xmlPlacement{AvailabilityZone: in.AZ, Tenancy: "default"}, Monitoring: "disabled",
		SubnetID: in.SubnetID, VpcID: vpcID, PrivateIPAddress: "127.0.0.1", Architecture: "x86_64",
		RootDeviceType: "ebs", RootDeviceName: "/dev/xvda", VirtualizationType: "hvm",
		ClientToken: in.ClientToken, Hypervisor: "xen",
		CapacityReservation: &xmlCapacityPrefs{Preference: "open"},
	}
	if in.State == StateTerminated {
		x.PrivateDNSName, x.PrivateIPAddress = "", ""
	}
	for _, g := range in.SecurityGroups {
		x.Groups = append(x.Groups, xmlGroup{GroupID: g, GroupName: g})
	}
	if in.StateReason != "" {
		x.StateReason = &xmlStateReason{Code: in.StateReason, Message: reasonMessage(in.StateReason)}
	} else if in.State == StatePending {
		x.StateReason = &xmlStateReason{Code: "pending", Message: "pending"}
	}
	if in.State != StateTerminated {
		bd := xmlBlockDevice{DeviceName: "/dev/xvda"}
		bd.Ebs.VolumeID, bd.Ebs.Status, bd.Ebs.AttachTime, bd.Ebs.DeleteOnTermination = in.VolumeID, "attached", ec2Time(in.LaunchTime), true
		x.BlockDevices = []xmlBlockDevice{bd}
	}
	if in.Market == MarketSpot {
		x.InstanceLifecycle, x.SpotInstanceRequestID = "spot", in.SpotRequestID
	}
	x.Tags = xmlTags(in.Tags)
	if in.InstanceProfile != "" {
		arn := in.InstanceProfile
		if !strings.HasPrefix(arn, "arn:") {
			arn = "arn:aws:iam::" + AccountID + ":instance-profile/" + arn
		}
		x.IamInstanceProfile = &xmlProfile{Arn: arn, ID: "AIPA" + strings.ToUpper(in.ID[2:])}
	}
	return x
}

func xmlTags(m map[string]string) []xmlTag {
	out := make([]xmlTag, 0, len(m))
	for k, v := range m {
		out = append(out, xmlTag{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

var (
	_ response = (*runInstancesResponse)(nil)
	_ response = (*describeInstancesResponse)(nil)
	_ response = (*terminateInstancesResponse)(nil)
	_ response = (*createTagsResponse)(nil)
	_ response = (*describeSpotPriceHistoryResponse)(nil)
	_ response = (*describeInstanceTypesResponse)(nil)
)
