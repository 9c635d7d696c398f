package egress

import "corral"

// Expand is the rules an allow-list grants: placeholder until the proxy
// branch lands.
func Expand(e corral.Egress) []corral.EgressRule { return e.Allow }

// Normalize: placeholder until the proxy branch lands.
func Normalize(e corral.Egress) (corral.Egress, error) { return e, nil }

// Presets: placeholder until the proxy branch lands.
var Presets = map[string][]corral.EgressRule{}

// PresetNames: placeholder.
func PresetNames() []string { return nil }
