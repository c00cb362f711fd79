package ec2sim

import (
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// ec2Namespace is the XML namespace of EC2's responses (API version 2016-11-15).
const (
	ec2Version   = "2016-11-15"
	ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"
)

// apiError is an error as a service returns it: the SDK types it as a smithy.APIError with Code.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// ec2Err is an EC2 error with the HTTP status EC2 gives its code.
func ec2Err(code, format string, args ...any) *apiError {
	return &apiError{Status: ec2Status(code), Code: code, Message: fmt.Sprintf(format, args...)}
}

// ec2Status is the HTTP status EC2 answers an error code with: capacity and internal errors
// are server errors (500, which the SDK's standard retryer retries), throttling is 503, a dry run
// that would have succeeded is 412.
func ec2Status(code string) int {
	switch code {
	case "DryRunOperation":
		return http.StatusPreconditionFailed
	case "UnauthorizedOperation":
		return http.StatusForbidden
	case "AuthFailure":
		return http.StatusUnauthorized
	case "InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientAddressCapacity",
		"InsufficientHostCapacity", "InternalError":
		return http.StatusInternalServerError
	case "RequestLimitExceeded", "Unavailable", "ServiceUnavailable":
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// Call is one request the fake answered.
type Call struct {
	Time time.Time
	// Service is "ec2", "pricing" or "servicequotas".
	Service string
	Action  string
	// Params are the request's parameters: EC2's form keys as sent (ClientToken,
	// TagSpecification.1.Tag.1.Key, ...; Action and Version left out), or the JSON services'
	// top-level scalar fields.
	Params map[string]string
	// Error is the error code answered ("DryRunOperation" included); empty when it succeeded.
	Error string
}

// IAMAction is the IAM action that authorizes the call, such as ec2:RunInstances or
// pricing:GetProducts: the fake's service names are IAM's prefixes.
func (c Call) IAMAction() string { return c.Service + ":" + c.Action }

// respMeta opens every EC2 response.
type respMeta struct {
	Xmlns     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
}

func (m *respMeta) meta() *respMeta { return m }

type response interface{ meta() *respMeta }

type xmlErrorResponse struct {
	XMLName   xml.Name   `xml:"Response"`
	Errors    []xmlError `xml:"Errors>Error"`
	RequestID string     `xml:"RequestID"`
}

type xmlError struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func newRequestID() string {
	a, b := rand.Uint64(), rand.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", a>>32, a>>16&0xffff, a&0xfff, b>>48&0xfff, b&0xffffffffffff)
}

// randomID is an EC2 resource id: the prefix and 17 hexadecimal digits.
func randomID(prefix string) string {
	return fmt.Sprintf("%s-0%016x", prefix, rand.Uint64())
}

func (s *Server) serveQuery(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	if err := r.ParseForm(); err != nil {
		writeEC2(w, reqID, nil, ec2Err("MalformedQueryString", "%v", err))
		return
	}
	action := r.Form.Get("Action")
	p := params{r.Form}
	resp, err := s.ec2Action(r, action, p)
	s.record("ec2", action, p.flat(), err)
	writeEC2(w, reqID, resp, err)
}

func (s *Server) ec2Action(r *http.Request, action string, p params) (response, error) {
	if msg := s.checkSignature(r, "ec2"); msg != "" {
		return nil, ec2Err("AuthFailure", "%s", msg)
	}
	if s.takeThrottle() {
		return nil, ec2Err("RequestLimitExceeded", "Request limit exceeded.")
	}
	if action == "" {
		return nil, ec2Err("MissingAction", "The request must contain the parameter Action.")
	}
	if v := p.Get("Version"); v != ec2Version {
		return nil, ec2Err("InvalidParameterValue", "Version %q is not supported; the fake speaks %s.", v, ec2Version)
	}
	if s.isDenied(action) {
		return nil, ec2Err("UnauthorizedOperation", "You are not authorized to perform this operation. User: arn:aws:iam::%s:user/ec2sim is not authorized to perform: ec2:%s", AccountID, action)
	}
	switch action {
	case "RunInstances":
		return s.runInstances(p)
	case "DescribeInstances":
		return s.describeInstances(p)
	case "TerminateInstances":
		return s.terminateInstances(p)
	case "CreateTags":
		return s.createTags(p)
	case "DescribeSpotPriceHistory":
		return s.describeSpotPriceHistory(p)
	case "DescribeInstanceTypes":
		return s.describeInstanceTypes(p)
	case "CreateSecurityGroup":
		return s.createSecurityGroup(p)
	case "AuthorizeSecurityGroupIngress":
		return s.authorizeSecurityGroupIngress(p)
	case "DeleteSecurityGroup":
		return s.deleteSecurityGroup(p)
	case "DescribeSecurityGroups":
		return s.describeSecurityGroups(p)
	case "DescribeSubnets":
		return s.describeSubnets(p)
	}
	return nil, ec2Err("InvalidAction", "The action %s is not valid for this web service.", action)
}

func writeEC2(w http.ResponseWriter, reqID string, resp response, err error) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("X-Amzn-Requestid", reqID)
	var body any
	status := http.StatusOK
	if err != nil {
		ae := asAPIError(err)
		status = ae.Status
		body = xmlErrorResponse{Errors: []xmlError{{Code: ae.Code, Message: ae.Message}}, RequestID: reqID}
	} else {
		m := resp.meta()
		m.Xmlns, m.RequestID = ec2Namespace, reqID
		body = resp
	}
	out, merr := xml.Marshal(body)
	if merr != nil {
		status = http.StatusInternalServerError
		out, _ = xml.Marshal(xmlErrorResponse{Errors: []xmlError{{Code: "InternalError", Message: merr.Error()}}, RequestID: reqID})
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(out)
}

func asAPIError(err error) *apiError {
	if ae, ok := err.(*apiError); ok {
		return ae
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "InternalError", Message: err.Error()}
}

func (s *Server) record(service, action string, p map[string]string, err error) {
	c := Call{Time: time.Now(), Service: service, Action: action, Params: p}
	if err != nil {
		c.Error = asAPIError(err).Code
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

// checkSignature checks what a SigV4 Authorization header says, not its signature: that the
// request was signed, for this service, in a region this endpoint serves. It returns why not,
// or "".
func (s *Server) checkSignature(r *http.Request, service string) string {
	h := r.Header.Get("Authorization")
	const algo = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(h, algo) {
		return "AWS was not able to validate the provided access credentials (the request is not signed with SigV4)."
	}
	_, cred, ok := strings.Cut(h, "Credential=")
	if !ok {
		return "Authorization header requires a Credential parameter."
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" {
		return fmt.Sprintf("Credential %q is not scoped as KEY/DATE/REGION/SERVICE/aws4_request.", cred)
	}
	if parts[3] != service {
		return fmt.Sprintf("Credential should be scoped to correct service: '%s'.", service)
	}
	if region := parts[2]; !s.servesRegion(service, region) {
		return fmt.Sprintf("Credential should be scoped to a valid region, not '%s'.", region)
	}
	return ""
}

// servesRegion: the Price List API lives in three regions whatever the account's region is.
func (s *Server) servesRegion(service, region string) bool {
	if service == "pricing" {
		return region == "us-east-1" || region == "eu-central-1" || region == "ap-south-1"
	}
	return region == s.cfg.Region
}
