// Package testrules holds checks over the tree's own source that the
// compiler cannot make: which constructors a test may not call, so that a
// rule written once in a type cannot be dodged. It has no code of its own;
// its tests are the rules.
package testrules
