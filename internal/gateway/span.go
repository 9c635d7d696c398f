package gateway

import (
	"context"
	"errors"
	"strconv"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"corral"
	"corral/internal/telemetry"
)

// chatEnd is how a call's span ends: r is its last try (zero when none
// was made), err what Complete returned.
func chatEnd(ctx context.Context, resp corral.ModelResponse, r result, err error) telemetry.ChatEnd {
	e := telemetry.ChatEnd{ResponseModel: resp.Model, Usage: r.usage, Reported: r.metered}
	if e.ResponseModel == "" {
		e.ResponseModel = r.model
	}
	if r.finish != "" {
		e.FinishReasons = []string{r.finish}
	}
	if err != nil {
		e.ErrorType = r.errorType(ctx)
		if e.ErrorType == "" {
			// Refused before it went (the budget, a bad request), or its
			// usage could not be recorded: Corral's error code.
			e.ErrorType = string(corral.ErrorCode(err))
		}
	}
	return e
}

// errorType says in a word why a try failed, in the order settle judges
// it: the provider's HTTP status, or what went wrong without one. "" when
// the try itself did not fail.
func (r result) errorType(ctx context.Context) string {
	var streamErr *ssestream.StreamError
	x := r.exchange
	switch {
	case r.cancelled:
		return "cancelled"
	case r.err != nil && ctx.Err() != nil:
		return "cancelled"
	case r.err != nil && x != nil && x.responded && x.status >= 400:
		return strconv.Itoa(x.status)
	case r.err != nil && errors.As(r.err, &streamErr):
		return "stream_error"
	case r.err != nil:
		return "unavailable"
	case r.exchange == nil:
		return "" // no try was made
	case !r.metered:
		return "no_usage"
	case r.malformed:
		return "malformed_response"
	case r.message == nil:
		return "no_reply"
	}
	return ""
}
