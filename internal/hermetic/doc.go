// Package hermetic holds no code: its test checks that nothing in the
// repository's build or tests reads a path outside the repository (a
// folder beside the clone, a home directory), so that a plain
// clone builds and tests on its own.
package hermetic
