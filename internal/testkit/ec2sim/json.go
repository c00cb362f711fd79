package ec2sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The JSON services (awsJson1_1): the operation is named by X-Amz-Target, errors by __type
// and the X-Amzn-ErrorType header.
const (
	pricingTarget = "AWSPriceListService"
	quotasTarget  = "ServiceQuotasV20190624"
)

func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	prefix, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	service := map[string]string{pricingTarget: "pricing", quotasTarget: "servicequotas"}[prefix]
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var out any
	if err == nil {
		out, err = s.jsonAction(r, service, op, body)
	}
	s.record(service, op, flatJSON(body), err)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", reqID)
	if err != nil {
		ae := asAPIError(err)
		w.Header().Set("X-Amzn-ErrorType", ae.Code)
		w.WriteHeader(ae.Status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": ae.Code, "message": ae.Message})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

func jsonErr(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (s *Server) jsonAction(r *http.Request, service, op string, body []byte) (any, error) {
	if service == "" {
		return nil, jsonErr(http.StatusBadRequest, "UnknownOperationException", "No service answers X-Amz-Target %q here.", r.Header.Get("X-Amz-Target"))
	}
	if msg := s.checkSignature(r, service); msg != "" {
		return nil, jsonErr(http.StatusForbidden, "InvalidSignatureException", "%s", msg)
	}
	if s.takeThrottle() {
		if service == "pricing" {
			return nil, jsonErr(http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
		}
		return nil, jsonErr(http.StatusBadRequest, "TooManyRequestsException", "Rate exceeded")
	}
	if s.isDenied(op) {
		return nil, jsonErr(http.StatusBadRequest, "AccessDeniedException", "User: arn:aws:iam::%s:user/ec2sim is not authorized to perform: %s:%s", AccountID, service, op)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	switch {
	case service == "pricing" && op == "GetProducts":
		var in getProductsInput
		if err := dec.Decode(&in); err != nil {
			return nil, jsonErr(http.StatusBadRequest, "InvalidParameterException", "Invalid input: %v", err)
		}
		return s.getProducts(in)
	case service == "servicequotas" && op == "GetServiceQuota":
		var in getServiceQuotaInput
		if err := dec.Decode(&in); err != nil {
			return nil, jsonErr(http.StatusBadRequest, "IllegalArgumentException", "Invalid input: %v", err)
		}
		return s.getServiceQuota(in)
	}
	return nil, jsonErr(http.StatusBadRequest, "UnknownOperationException", "The fake does not serve %s.%s.", service, op)
}

// flatJSON is a JSON request's top-level scalar fields, for Calls.
func flatJSON(body []byte) map[string]string {
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	out := map[string]string{}
	for k, v := range m {
		switch v.(type) {
		case string, float64, bool:
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

type getServiceQuotaInput struct {
	ServiceCode string
	QuotaCode   string
	ContextId   string
}

func (s *Server) getServiceQuota(in getServiceQuotaInput) (any, error) {
	if in.ServiceCode == "" || in.QuotaCode == "" {
		return nil, jsonErr(http.StatusBadRequest, "IllegalArgumentException", "ServiceCode and QuotaCode are required.")
	}
	s.mu.Lock()
	v, ok := s.quotas[in.QuotaCode]
	s.mu.Unlock()
	if in.ServiceCode != "ec2" || !ok {
		return nil, jsonErr(http.StatusBadRequest, "NoSuchResourceException", "The request failed because the specified quota %s/%s does not exist.", in.ServiceCode, in.QuotaCode)
	}
	name := quotaName(in.QuotaCode)
	if name == "" {
		name = in.QuotaCode
	}
	return map[string]any{"Quota": map[string]any{
		"ServiceCode": "ec2", "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
		"QuotaArn":  fmt.Sprintf("arn:aws:servicequotas:%s:%s:ec2/%s", s.cfg.Region, AccountID, in.QuotaCode),
		"QuotaCode": in.QuotaCode, "QuotaName": name, "Value": v, "Unit": "None",
		"Adjustable": true, "GlobalQuota": false, "QuotaAppliedAtLevel": "ACCOUNT",
	}}, nil
}
