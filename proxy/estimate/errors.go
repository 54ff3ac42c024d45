package estimate

import (
	"errors"
	"fmt"
	"net/http"
)

// The refusals, by the status the caller answers with. Every error Parse, Decode,
// CheckMaxOutput and HoldFor return wraps exactly one of them.
var (
	ErrInvalid             = errors.New("invalid request body")         // 400
	ErrTooLarge            = errors.New("request body too large")       // 413
	ErrUnsupportedEncoding = errors.New("unsupported content encoding") // 415
)

// BodyError explains a refused body in words the caller can send back as is.
type BodyError struct {
	Err     error  // ErrInvalid, ErrTooLarge or ErrUnsupportedEncoding
	Field   string // the JSON field at fault ("max_tokens"), or "" for the body as a whole
	Message string // e.g. `max_tokens must be a positive integer, got "abc"`
}

func (e *BodyError) Error() string { return e.Message }

func (e *BodyError) Unwrap() error { return e.Err }

// HTTPStatus is the status for an error from this package: 400, 413 or 415; 0 for
// any other error.
func HTTPStatus(err error) int {
	switch {
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrUnsupportedEncoding):
		return http.StatusUnsupportedMediaType
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	}
	return 0
}

func invalidField(field, format string, args ...any) error {
	return &BodyError{Err: ErrInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

func invalidBody(format string, args ...any) error {
	return &BodyError{Err: ErrInvalid, Message: fmt.Sprintf(format, args...)}
}
