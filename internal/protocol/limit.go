package protocol

import (
	"encoding/json"
	"strconv"
)

// CapOutput returns body (a JSON object) with its output cap at most
// limit, so that what the call can spend is bounded before it is sent:
// each of fields that is there and is not a whole number from 1 to limit
// becomes limit; when none is there, the first is added. A body that
// already holds a cap within the limit comes back as it is.
func CapOutput(body []byte, limit int64, fields ...string) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, invalid("the request body is not a JSON object")
	}
	capped := strconv.AppendInt(nil, limit, 10)
	changed, found := false, false
	for _, f := range fields {
		raw, ok := obj[f]
		if !ok || string(raw) == "null" {
			continue
		}
		found = true
		var n int64
		if json.Unmarshal(raw, &n) == nil && n >= 1 && n <= limit {
			continue
		}
		obj[f], changed = capped, true
	}
	if !found && len(fields) > 0 {
		obj[fields[0]], changed = capped, true
	}
	if !changed {
		return body, nil
	}
	out, err := marshal(obj)
	if err != nil {
		return nil, invalid("the request body is not valid JSON")
	}
	return out, nil
}
