package corral

import (
	"errors"
	"fmt"
	"time"
)

// Error codes. They are part of the public API (see docs/api.md's table
// of errors): clients match on them, so they never change meaning.
const (
	EINVALID    = "invalid_input"
	ENAME       = "invalid_name"
	ECONTENT    = "invalid_content"
	EUNAUTH     = "unauthenticated"
	EFORBIDDEN  = "forbidden"
	ENOTFOUND   = "not_found"
	ECONFLICT   = "conflict"
	ETOOLARGE   = "too_large"
	ETHROTTLED  = "throttled"
	EADMISSION  = "admission_denied"
	EUNAVAIL    = "unavailable"
	EINTERNAL   = "internal"
	ENOTALLOWED = "method_not_allowed"
)

// Error is the one error type of Corral. Code is for machines, Message for
// people, Err for the log: Err is never shown to a caller.
type Error struct {
	Code    string
	Message string
	Op      string // the operation that failed, for the log
	Err     error  // the internal cause, for the log

	// RetryAfter, when set, tells the caller when to try again (throttled).
	RetryAfter time.Duration
	// Reason refines Code for admission_denied (prompt_too_large, busy, ...).
	Reason string
}

func (e *Error) Error() string {
	var s string
	if e.Op != "" {
		s = e.Op + ": "
	}
	if e.Message != "" {
		s += e.Message
	} else {
		s += e.Code
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a formatted user-facing
// message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Internal wraps an unexpected failure: the caller sees only "internal".
func Internal(op string, err error) *Error {
	return &Error{Code: EINTERNAL, Message: "internal error", Op: op, Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL
// for any other error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the user-facing message of err. Errors that are not
// an *Error never show their text: it may carry internal detail.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return "internal error"
}

// NotFound is the answer for a missing resource and for one the caller may
// not see: the two must be indistinguishable, so both come from here.
func NotFound(kind string) *Error {
	return &Error{Code: ENOTFOUND, Message: kind + " not found"}
}
