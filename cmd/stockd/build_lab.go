//go:build lab

package main

// labBuild is true: this stockd was built with -tags lab, and has the
// lab's backends and failpoints (still behind lab.unsafe).
const labBuild = true
