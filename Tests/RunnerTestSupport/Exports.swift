// The test clock, the HTTP double and the scripted monitor ship in the `RunnerTesting` product
// for adopters' tests; the project's own tests get them through this target as before.
@_exported import RunnerTesting
