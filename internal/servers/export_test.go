package servers

// EphemeralLow is ephemeralLow, for the external tests.
var EphemeralLow = ephemeralLow
