// Package k8s holds seckill's Kubernetes manifests (kustomize: base/ and one
// overlay per lock backend under overlays/) and, in its tests, their offline
// validation: every kustomization is rendered with the kustomize API and
// every object strictly decoded into the k8s.io/api types. It is a module of
// its own so that the main module does not carry the Kubernetes
// dependencies; make test runs it.
package k8s
