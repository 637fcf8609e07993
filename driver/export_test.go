package driver

// HostFuncsQueued is hostFuncsQueued, for the fake-driver tests: how many
// host functions hold a slot of the dispatch table.
var HostFuncsQueued = hostFuncsQueued
