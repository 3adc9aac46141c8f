//go:build lab

package stockd

// LabBuild is true: this stockd was built with -tags lab, and has the
// lab's backends and failpoints (still behind lab.unsafe).
const LabBuild = true
