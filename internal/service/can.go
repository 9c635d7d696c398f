package service

import (
	"corral"
	"corral/internal/access"
)

// Actions names every action of the access policy, in its order.
func Actions() []string {
	var out []string
	for _, a := range access.Actions() {
		out = append(out, a.String())
	}
	return out
}

// Allowed names the actions of the access policy that a caller holding
// level on an agent may take, in the policy's order: what an agent's view
// tells a client it can do. Every request is still decided on its own.
func Allowed(level corral.Level) []string {
	out := []string{}
	for _, a := range access.Actions() {
		if access.Check(level, a) == access.Allow {
			out = append(out, a.String())
		}
	}
	return out
}
