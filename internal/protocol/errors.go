package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"corral"
)

// WriteError writes an error of the gateway's own in the protocol's error
// shape: OpenAI's {"error": {"message", "type", "code"}} for Chat and
// Responses, Anthropic's {"type": "error", "error": {"type", "message"}} for
// Messages. status says what happened, and WriteError picks what makes each
// CLI stop or retry as it should (measured against the real CLIs, see the
// package tests):
//
//   - 400, 404: the request is wrong. Every CLI stops.
//   - 401: the token is not (or no longer) valid.
//   - 402: the budget is spent. The CLI must stop, not retry: Codex stops at
//     once only on 429 with code insufficient_quota (it retries a 402 five
//     times), so Responses answers that; OpenCode and Claude Code stop on
//     402 as it is.
//   - 403: the model or the call is not allowed.
//   - 429: slow down; the CLIs retry, after the Retry-After the caller set.
//   - 5xx: the provider cannot be reached (502) or the gateway failed.
//
// Claude Code retries a 401 or a 429 ten times over minutes unless told
// not to: every error a retry cannot mend carries "x-should-retry: false",
// which Claude Code and the OpenAI and Anthropic SDKs obey.
//
// Set Retry-After on w before calling, when there is one to give.
func WriteError(w http.ResponseWriter, p Protocol, status int, message string) {
	code := ""
	if p == Responses && status == http.StatusPaymentRequired {
		status, code = http.StatusTooManyRequests, "insufficient_quota"
	}
	if !retryable(status) || code == "insufficient_quota" {
		w.Header().Set("X-Should-Retry", "false")
	}
	writeErrorBody(w, p, status, message, code)
}

// WriteBudget writes the error of a spent budget: WriteError's 402, in
// the shape that makes the protocol's CLI stop at once.
func WriteBudget(w http.ResponseWriter, p Protocol, message string) {
	WriteError(w, p, http.StatusPaymentRequired, message)
}

// retryable is whether a retry may mend an error of this status.
func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// writeErrorBody writes an error in p's shape. code, when set, is the
// OpenAI error code; otherwise the status gives it.
func writeErrorBody(w http.ResponseWriter, p Protocol, status int, message, code string) {
	var v any
	if p == Messages {
		v = map[string]any{"type": "error", "error": map[string]any{"type": anthropicType(status), "message": message}}
	} else {
		typ, c := openAIType(status)
		if code != "" {
			c = code
			if code == "insufficient_quota" {
				typ = code
			}
		}
		e := map[string]any{"message": message, "type": typ, "param": nil, "code": nil}
		if c != "" {
			e["code"] = c
		}
		v = map[string]any{"error": e}
	}
	b, _ := marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	w.Write(b)
}

// openAIType is the OpenAI error type and code of a status.
func openAIType(status int) (typ, code string) {
	switch {
	case status == http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case status == http.StatusPaymentRequired:
		return "insufficient_quota", "insufficient_quota"
	case status == http.StatusForbidden:
		return "permission_error", "forbidden"
	case status == http.StatusNotFound:
		return "invalid_request_error", "not_found"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error", "rate_limit_exceeded"
	case status >= 500:
		return "server_error", "server_error"
	}
	return "invalid_request_error", ""
}

// anthropicType is Anthropic's error type of a status, as its API names
// them: Claude Code picks its wording and its retries by them.
func anthropicType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case 529, http.StatusServiceUnavailable:
		return "overloaded_error"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// relayError writes a provider's error answer in the call's protocol: the
// same status, the provider's message verbatim (clients recover by its
// wording: "context length", "rate limit"), and for 429 and 5xx the
// provider's Retry-After, in both its forms.
func relayError(w http.ResponseWriter, upstream *http.Response, call Call, res *Result) {
	b, _ := io.ReadAll(io.LimitReader(upstream.Body, maxErrorBody))
	status := upstream.StatusCode
	pe := parseProviderError(b)
	if pe.Message == "" {
		pe.Message = fmt.Sprintf("the model provider answered %d %s", status, http.StatusText(status))
	}
	res.Err = protocolError(status, pe.Message)
	h := w.Header()
	if status == http.StatusTooManyRequests || status >= 500 {
		for _, k := range []string{"Retry-After", "Retry-After-Ms"} {
			if v := upstream.Header.Get(k); v != "" {
				h.Set(k, v)
			}
		}
	}
	if v := upstream.Header.Get("X-Should-Retry"); v != "" {
		h.Set("X-Should-Retry", v)
	}
	// A provider that refuses Corral's key, or whose account is out of
	// credit, will refuse every retry: tell the CLI not to.
	if status == http.StatusUnauthorized || status == http.StatusForbidden || pe.code() == "insufficient_quota" {
		h.Set("X-Should-Retry", "false")
	}
	if call.Protocol != Messages && pe.valid {
		// OpenAI's own shape: forward it as the provider wrote it, its
		// type and code included (Codex reads the code).
		h.Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(b)
		return
	}
	writeErrorBody(w, call.Protocol, status, pe.Message, pe.code())
}

// parsedError is a provider's error body, read as well as it can be:
// OpenAI's {"error": {...}}, {"error": "text"}, {"message": ...},
// {"detail": ...}, or plain text.
type parsedError struct {
	providerError
	valid bool // it is OpenAI's shape
}

func parseProviderError(b []byte) parsedError {
	var pe parsedError
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(b, &v) != nil {
		pe.Message = strings.TrimSpace(string(b))
		if len(pe.Message) > 2000 || strings.HasPrefix(pe.Message, "<") {
			pe.Message = "" // an HTML error page says nothing a client can use
		}
		return pe
	}
	if json.Unmarshal(v.Error, &pe.providerError) == nil && pe.providerError.Message != "" {
		pe.valid = true
		return pe
	}
	var s string
	if json.Unmarshal(v.Error, &s) == nil && s != "" {
		pe.Message = s
		return pe
	}
	if v.Message != "" {
		pe.Message = v.Message
		return pe
	}
	if v.Detail != nil {
		if s, ok := v.Detail.(string); ok {
			pe.Message = s
		} else {
			d, _ := json.Marshal(v.Detail)
			pe.Message = string(d)
		}
	}
	return pe
}

// protocolError is what a relay returns as Err for a provider's error answer.
func protocolError(status int, message string) error {
	return &corral.Error{Code: corral.EUNAVAIL, Op: "protocol",
		Message: fmt.Sprintf("the model provider answered %d", status), Err: errors.New(message)}
}
