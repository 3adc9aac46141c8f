//go:build !lab

package stockd

// LabBuild is false: this is the product, without the lab's backends,
// failpoints or unfenced sales (go build -tags lab adds them).
const LabBuild = false
